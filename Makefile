# Veil: `make demo` runs a two-person call on an embedded default; `make test` runs the tests.
# Each first installs whatever is missing (scripts/bootstrap: Debian packages, pinned PyPI downloads).
# `make fuzz` runs the libFuzzer harnesses of Fuzz/ for FUZZ_SECONDS each (docs/reliability.md).
# `make privacy` runs the re-identification experiment (docs/privacy.md): tens of minutes; with
# PHOTOS=DIR on your own photos (each photo's largest face is one person).
SWIFT ?= swift
CONFIG ?= release
SWIFTFLAGS := -c $(CONFIG)
VEIL := .build/$(CONFIG)/veil
QUICK ?=
FUZZ_SECONDS ?= 60
PHOTOS ?=
SESSIONS ?= 4
PRIVACY_OUT ?= $(if $(PHOTOS),out/privacy,privacy/results)

.PHONY: all bootstrap build demo test fuzz bench privacy clean
all: build

bootstrap:
	@scripts/bootstrap

build: bootstrap
	$(SWIFT) build $(SWIFTFLAGS) --product veil

demo: build
	$(VEIL) demo --out out

# One build for everything the tests run (the `veil` they start included), then scripts/test: the
# real-time suites and the CPU-heavy re-identification experiment (+ fuzz smoke pass) side by side.
# Tests/VeilInteropTests/python/setup first installs python-osc and prometheus_client (pinned,
# hash-checked) into .cache/veil/interop/venv: the OSC implementation Veil's VMC output is checked
# against, and the Prometheus text-format parser that reads `veil serve`'s /metrics.
test: bootstrap
	@Tests/VeilInteropTests/python/setup
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

# privacy/setup fetches the pinned photos and the attacker's scikit-learn once (cached, checked);
# veil-privacy records every person's sessions; privacy/attack.py attacks them and scores expression.
privacy: bootstrap
	@privacy/setup
	$(SWIFT) build $(SWIFTFLAGS) --product veil-privacy
	.build/$(CONFIG)/veil-privacy --out out/privacy/sessions --sessions $(SESSIONS) $(if $(PHOTOS),--photos $(PHOTOS),)
	@mkdir -p $(PRIVACY_OUT)
	.cache/veil/privacy/venv/bin/python privacy/attack.py out/privacy/sessions --json $(PRIVACY_OUT)/report.json | tee $(PRIVACY_OUT)/report.md

clean:
	rm -rf .build out
