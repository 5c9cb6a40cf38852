# make demo: build snapctl and the demo server (examples/server.c), then hunt
# the server's leak with examples/plan.yaml. The work is in examples/demo.sh,
# which also runs on its own where make is not installed. Everything it
# builds and writes goes to examples/build/.

.PHONY: demo clean
demo:
	@examples/demo.sh

clean:
	rm -rf examples/build
