# Veil: `make demo` runs a two-person call on an embedded default; `make test` runs the tests.
# Each first installs whatever is missing (scripts/bootstrap: Debian packages, pinned PyPI downloads).
# `make fuzz` runs the libFuzzer harnesses of Fuzz/ for FUZZ_SECONDS each (docs/reliability.md).
SWIFT ?= swift
CONFIG ?= release
SWIFTFLAGS := -c $(CONFIG)
VEIL := .build/$(CONFIG)/veil
QUICK ?=
FUZZ_SECONDS ?= 60

.PHONY: all bootstrap build demo test fuzz bench clean
all: build

bootstrap:
	@scripts/bootstrap

build: bootstrap
	$(SWIFT) build $(SWIFTFLAGS) --product veil

demo: build
	$(VEIL) demo --out out

# One build for everything the tests run (the `veil` they start included), then scripts/test: the
# real-time suites and the CPU-heavy re-identification experiment (+ fuzz smoke pass) side by side.
test: bootstrap
	$(SWIFT) build $(SWIFTFLAGS) -Xswiftc -enable-testing --build-tests
	SWIFT=$(SWIFT) CONFIG=$(CONFIG) scripts/test

# Each harness for FUZZ_SECONDS on its seed corpus (Fuzz/corpus/); findings in .build/fuzz/artifacts/.
fuzz: bootstrap
	SWIFT=$(SWIFT) FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz

# bench/peers/setup installs dlib and MediaPipe for the comparison once (cached, outside the timed
# run); a peer it cannot install shows as "not installed" in the report instead of failing the bench.
bench: build
	@bench/peers/setup
	$(VEIL) bench $(if $(QUICK),--quick,) --out bench/results

clean:
	rm -rf .build out
