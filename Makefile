# make demo: build snapctl and the demo server (examples/server.c), then hunt
# the server's leak with examples/plan.yaml. Needs go, gcc, gdb and valgrind;
# everything it builds and writes goes to examples/build/.

GO ?= go
CC := $(if $(filter default,$(origin CC)),gcc,$(CC))

BUILD := examples/build

.PHONY: demo clean
demo: $(BUILD)/snapctl $(BUILD)/server
	rm -rf $(BUILD)/run
	$(BUILD)/snapctl run --out $(BUILD)/run examples/plan.yaml $(BUILD)/server
	@echo "run directory: $(BUILD)/run (report.md, run.json, snapshots/)"

# Always handed to go build, which knows when nothing changed.
.PHONY: $(BUILD)/snapctl
$(BUILD)/snapctl:
	$(GO) build -o $@ ./cmd/snapctl

$(BUILD)/server: examples/server.c
	@mkdir -p $(BUILD)
	$(CC) -g -O0 -pthread -o $@ examples/server.c

clean:
	rm -rf $(BUILD)
