# Two commands for users (see README): `make demo` and `make test`. Both set everything up first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
# Extras installed by `make setup` (pybullet: the second physics backend; llm: the embedded planner, its
# llama.cpp wheel built once per machine and cached in WHEEL_CACHE; ros: ROS 2 from PyPI wheels, and control_msgs'
# two arm actions compiled from ros_interfaces/ (~50 s once per machine, then cached); panda: panda-gym,
# the foreign goal env hrl-train is tested on). Others are opt-in: make setup EXTRAS=mujoco,...,dev,cluster
EXTRAS ?= mujoco,pybullet,rl,llm,ros,posttrain,vla,panda,dev
LLAMA_CPP_VERSION ?= 0.3.36
WHEEL_CACHE ?= $(HOME)/.cache/hrl-stack/wheels
# CPU build of PyTorch (a plain `torch` requirement would pull a multi-GB CUDA build).
TORCH_SPEC ?= torch==2.13.0
comma := ,
STAMP := $(VENV)/.setup-$(subst $(comma),-,$(EXTRAS))
LLM := $(findstring llm,$(EXTRAS))

.PHONY: setup demo test test-slow lint format bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/install_system_deps.sh scripts/cache_llama_wheel.sh scripts/build_control_msgs.sh $(wildcard ros_interfaces/control_msgs/*/*)
	bash scripts/install_system_deps.sh
	@$(PYTHON) -c "import sys; sys.exit(sys.version_info < (3, 11))" || { echo "need Python >= 3.11 as $(PYTHON) (make setup PYTHON=python3.11)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip "setuptools>=77"  # >= 77: the build backend pyproject.toml names (tests build a wheel)
	$(PY) -c "import torch" 2>/dev/null || $(PIP) install --quiet "$(TORCH_SPEC)"
	$(if $(LLM),bash scripts/cache_llama_wheel.sh $(PY) $(LLAMA_CPP_VERSION) $(WHEEL_CACHE))
	$(PIP) install --quiet --find-links $(WHEEL_CACHE) -e ".[$(EXTRAS)]" $(if $(LLM),"llama-cpp-python[server]==$(LLAMA_CPP_VERSION)")
	$(if $(LLM),$(PY) -c "from llm_planner.llm.llama_cpp_backend import gemma3_model_path; print('[setup] default planner base:', gemma3_model_path())")
	$(if $(findstring ros,$(EXTRAS)),bash scripts/build_control_msgs.sh $(PY) $(HOME)/.cache/hrl-stack/control_msgs)
	rm -f $(VENV)/.setup-*
	touch $@

demo: setup
	$(PY) -m hrl.demo

test: setup
	$(PY) -m pytest

test-slow: setup
	$(PY) -m pytest -m slow

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: setup
	$(PY) benchmarks/env_throughput.py

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache *.egg-info
