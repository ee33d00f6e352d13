# Darkroom: each target installs what it needs first.
SWIFT ?= swift
OUT ?= out
BENCH_DIR ?= /tmp/darkroom-bench
SHARED ?= $(abspath ../shared)

.PHONY: deps demo test test-tsan test-asan bench build release link-order validate docs docs-stages api api-check format clean fuzz fuzz-build fuzz-smoke fuzz-cli

deps:
	@scripts/install-deps.sh

build: deps
	$(SWIFT) build --product darkroom

## release: the runner as it is measured. The Swift runtime and Foundation linked statically (a
## process starts ~10 ms sooner), by lld with packed relative relocations (DT_RELR) and no exported
## symbols, and the functions a typical run executes placed together (scripts/link-order.sh, made
## once per build folder; `make link-order` makes it again): together 58 -> 51 MB peak RSS on case H
## (Docs/Performance.md#the-runners-own-pages).
LINK_ORDER ?= .build/darkroom-link-order.txt
BENCH_BUILD ?= .build-bench
RELEASE_FLAGS = -c release --static-swift-stdlib -Xswiftc -use-ld=lld -Xswiftc -Xfrontend -Xswiftc -function-sections \
  -Xlinker -z -Xlinker pack-relative-relocs -Xlinker --no-export-dynamic \
  -Xlinker --symbol-ordering-file=$(CURDIR)/$(LINK_ORDER) -Xlinker --no-warn-symbol-ordering
release: deps
	@mkdir -p $(dir $(LINK_ORDER)) && touch $(LINK_ORDER)
	$(SWIFT) build $(RELEASE_FLAGS) --product darkroom
	@if [ ! -s $(LINK_ORDER) ]; then \
	  scripts/install-deps.sh --profile; \
	  if scripts/link-order.sh .build/release/darkroom $(LINK_ORDER); then \
	    rm -f .build/release/darkroom && $(SWIFT) build $(RELEASE_FLAGS) --product darkroom; \
	  else echo "warning: scripts/link-order.sh failed; the runner keeps the default function order"; fi; fi
	@# The store benchmarks in their own plain release build: linked with the runner's flags
	@# (function sections), darkroom-bench aborted with "corrupted size vs. prev_size" in
	@# DiskStore's init on 2026-11-25, which neither a plain nor an AddressSanitizer release build
	@# of the same code shows (Docs/Performance.md#the-runners-own-pages).
	$(SWIFT) build -c release --scratch-path $(BENCH_BUILD) --product darkroom-bench

link-order:
	rm -f $(LINK_ORDER)
	$(MAKE) release

## demo: runs the runner on the bundled example pipelines and images (offline); outputs in out/
demo: build
	@rm -rf $(OUT) && mkdir -p $(OUT)
	.build/debug/darkroom validate Examples/pipelines/*.json
	.build/debug/darkroom run Examples/pipelines/thumbnail.json Examples/images --output $(OUT)
	.build/debug/darkroom run Examples/pipelines/avatar.json Examples/images --output $(OUT)
	@echo "variants: three avatar sizes per image, each image fetched and decoded once"
	.build/debug/darkroom run Examples/pipelines/avatar-sizes.json Examples/images --output $(OUT)
	@echo "a disk-cached pipeline, twice: the second run only reads the cache"
	.build/debug/darkroom run Examples/pipelines/cached-thumbnail.json Examples/images --output $(OUT) --cache-dir $(OUT)/cache
	.build/debug/darkroom run Examples/pipelines/cached-thumbnail.json Examples/images --output $(OUT) --cache-dir $(OUT)/cache
	.build/debug/darkroom cache stats Examples/pipelines/cached-thumbnail.json --cache-dir $(OUT)/cache
	@echo "outputs:" && ls -l $(OUT)

## test: the whole test suite (reads the shared corpus from ../shared/corpus or $$DARKROOM_CORPUS), in
## two runs: the tests on PostgreSQL on their own after the rest. In one run, the image tests kept
## the test process's two cooperative threads busy for seconds at a time, and the queue calls the
## database tests make from that process missed their 15-second limit (CI, 2026-11-27).
## Swift Testing starts the ~500 tests of a run together on those two threads, so a test that
## awaits a few hundred times lasts about as long as the whole run (80-120 s here): the suites'
## time limits (3 minutes or more) are there to end a hang, not to time a test, and a test's long
## synchronous work (libvips computations, thousands of file writes) runs on a thread of its own
## (`onOwnThread`, DarkroomTesting), or its neighbours miss their limits (2026-11-28).
DB_TESTS = DarkroomPostgresTests|QueueWorkerTests|QueueWorkerAttackTests|QueueNetworkTests|QueueCommandTests|ServeSharedCacheTests
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --skip '$(DB_TESTS)'
	$(SWIFT) test --skip-build --filter '$(DB_TESTS)'

## fuzz: libFuzzer harnesses (json, decode, http, cache, imagetable, disk, thumbor) built with -sanitize=fuzzer,address,
## each run FUZZ_TIME seconds (default 60) on its seed corpora; fuzz-smoke: a fixed seed and input
## count per harness (about a minute in all; CI runs it)
FUZZ_TIME ?= 60
fuzz-build: deps
	$(SWIFT) build --scratch-path .build-fuzz --product darkroom-fuzz --sanitize=fuzzer --sanitize=address -Xswiftc -DFUZZING

fuzz: fuzz-build
	scripts/fuzz.sh $(FUZZ_TIME)

fuzz-smoke: fuzz-build
	scripts/fuzz.sh smoke

## fuzz-cli: the runner's command line and input file names, against the real binary, FUZZ_TIME
## seconds (scripts/fuzz_cli.py); failing inputs are kept in Tests/FuzzRegressions/cli
fuzz-cli: build
	python3 scripts/fuzz_cli.py $(CURDIR)/.build/debug/darkroom $(FUZZ_TIME) --seed $$(date +%s) --keep Tests/FuzzRegressions/cli

## test-tsan / test-asan: the suite under ThreadSanitizer / AddressSanitizer (own build folders)
test-tsan: deps
	$(SWIFT) test --sanitize=thread --scratch-path .build-tsan

test-asan: deps
	# Leak detection off: Swift keeps enum tags in spare pointer bits, which hides live references
	# from LeakSanitizer and makes it report static tables (option specs) as leaked.
	ASAN_OPTIONS=detect_leaks=0 $(SWIFT) test --sanitize=address --scratch-path .build-asan

## bench: release build, then ../shared/bench/compare.py cases A and B with darkroom beside the peers,
## the quality beside them (scripts/bench_quality.py: mean SSIM on luma of every photo's thumbnail
## against libvips' lossless one, beside libvips' own q80 thumbnail), the HTTP benchmark, the cache benchmark (scripts/bench_cache.py), the loader benchmark
## (scripts/bench_loader.py: coalescing on/off, cached hits under a saturated CPU class), memory
## (scripts/bench_memory.py), the image server against thumbor (scripts/bench_serve.py) and the
## PostgreSQL queue against darkroom run (scripts/bench_queue.py). A
## script whose goal is missed says so (NOT met / MISS) and exits 1; the `-` lets the other
## measurements run all the same. The HTTP benchmark runs 9 rounds: with 3, one slow curl run
## moved fetch-only from 0.78x to 1.09x (Docs/Performance.md, tenth stop).
bench: release
	@scripts/install-deps.sh --bench
	-DARKROOM_BENCH_DIR=$(BENCH_DIR) python3 $(SHARED)/bench/compare.py --case A \
	  --with 'darkroom=$(CURDIR)/.build/release/darkroom run $(CURDIR)/Examples/pipelines/bench-fit.json "$$IN" --output "$$OUT" --quiet'
	-DARKROOM_BENCH_DIR=$(BENCH_DIR) python3 $(SHARED)/bench/compare.py --case B \
	  --with 'darkroom=$(CURDIR)/.build/release/darkroom run $(CURDIR)/Examples/pipelines/bench-fill.json "$$IN" --output "$$OUT" --quiet'
	-DARKROOM_BENCH_DIR=$(BENCH_DIR) python3 scripts/bench_quality.py $(CURDIR)/.build/release/darkroom
	-DARKROOM_BENCH_DIR=$(BENCH_DIR) python3 scripts/bench_http.py $(CURDIR)/.build/release/darkroom --rounds 9
	-DARKROOM_BENCH_DIR=$(BENCH_DIR) python3 scripts/bench_cache.py $(CURDIR)/.build/release/darkroom $(CURDIR)/$(BENCH_BUILD)/release/darkroom-bench --rounds 9
	-DARKROOM_BENCH_DIR=$(BENCH_DIR) python3 scripts/bench_loader.py $(CURDIR)/$(BENCH_BUILD)/release/darkroom-bench
	-DARKROOM_BENCH_DIR=$(BENCH_DIR) python3 scripts/bench_memory.py $(CURDIR)/.build/release/darkroom
	-DARKROOM_BENCH_DIR=$(BENCH_DIR) python3 scripts/bench_serve.py $(CURDIR)/.build/release/darkroom
	-DARKROOM_BENCH_DIR=$(BENCH_DIR) python3 scripts/bench_queue.py $(CURDIR)/.build/release/darkroom
	-python3 scripts/bench_animation.py $(CURDIR)/.build/release/darkroom

## validate: the SwiftPM command plugin checks every pipeline file of the package
validate: deps
	$(SWIFT) package validate-pipelines

## docs: the DocC site of the library modules, combined into one static site in $(DOCS_OUT) (serve it
## with `python3 -m http.server -d $(DOCS_OUT)` and open /documentation/darkroom). The Docs/*.md
## articles are converted into the Darkroom catalog for the build only (scripts/docc-articles.py,
## into $(DOCS_SCRATCH), ignored by git and removed afterwards), so Docs/ stays their one copy.
DOCS_OUT ?= .build/docs
DOCS_SCRATCH = Sources/Darkroom/Darkroom.docc/Docs
DOC_TARGETS = Darkroom DarkroomCore DarkroomVips DarkroomCache DarkroomCurl DarkroomTesting DarkroomVipsTesting DarkroomHTTP \
  DarkroomPostgres
docs: deps
	rm -rf $(DOCS_OUT) $(DOCS_SCRATCH)
	python3 scripts/docc-articles.py Docs $(DOCS_SCRATCH)
	status=0; $(SWIFT) package --allow-writing-to-directory $(DOCS_OUT) generate-documentation \
	  $(addprefix --target ,$(DOC_TARGETS)) --enable-experimental-combined-documentation \
	  --transform-for-static-hosting --output-path $(DOCS_OUT) || status=$$?; \
	  rm -rf $(DOCS_SCRATCH); exit $$status
	@# The combined archive's landing page is /documentation; the site's root sends there.
	printf '<!doctype html>\n<meta http-equiv="refresh" content="0; url=documentation/">\n<a href="documentation/">Darkroom documentation</a>\n' > $(DOCS_OUT)/index.html

## api: lists the public API of the library modules, one file per module in api/ (scripts/api-listing.py,
## from their symbol graphs): commit it with a change that alters the API, so that the change shows
## in review. api-check: makes the listing anew and fails, showing the difference, when it is not
## the committed one (CI runs it after the tests, whose build it reuses).
api: deps
	rm -rf api
	SWIFT=$(SWIFT) python3 scripts/api-listing.py api

api-check: deps
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && SWIFT=$(SWIFT) python3 scripts/api-listing.py "$$tmp" && \
	if diff -ru api "$$tmp"; then echo "api-check: the public API is the one listed in api/"; \
	else echo "api-check: the public API is not the one listed in api/ (- listed, + now): run make api and commit api/"; exit 1; fi

## docs-stages: regenerates Docs/Stages.md from the registry
docs-stages: build
	.build/debug/darkroom stages --markdown > Docs/Stages.md

format:
	$(SWIFT) format --in-place --recursive Sources Tests Plugins Package.swift

clean:
	rm -rf .build $(OUT)
