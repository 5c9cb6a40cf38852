# The manual hunt on bench/bigheap, the baseline of plan-bytes.yaml: break
# at tick, take massif's detailed snapshot (monitor detailed_snapshot: live
# bytes per stack, no blocks), continue. Snapshot paths are relative to
# the target's working directory (the benchmark runs valgrind in the
# snapshot folder).
set pagination off
set confirm off
set $n = 0
break tick
commands
silent
set $n = $n + 1
eval "monitor detailed_snapshot s%d.massif", $n
continue
end
continue
