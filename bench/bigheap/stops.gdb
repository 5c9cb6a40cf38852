# The hand-written baseline for bench/bigheap/plan.yaml: break at tick, take a
# snapshot of live bytes and blocks per stack (monitor xtmemory, what snapctl
# takes), continue. Snapshot paths are relative to the target's
# working directory (the benchmark runs valgrind in the snapshot folder).
set pagination off
set confirm off
set $n = 0
break tick
commands
silent
set $n = $n + 1
eval "monitor xtmemory s%d.ms", $n
continue
end
continue
