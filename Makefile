# Entry points. `make lab` and `make test` are the two commands in the README.
SHELL := /bin/bash
VENV ?= .venv
ACTIVATE := source $(VENV)/bin/activate &&

.PHONY: setup setup-2.16 lab lab-up lab-down lab-status lab-images site check render test lint unit compat

setup:            ## Python venv and offline collections
	@bash scripts/setup.sh

setup-2.16:       ## a second control machine on ansible-core 2.16 for EL 7 fleets: .venv-2.16
	@bash scripts/setup.sh --core 2.16

lab-images:       ## Docker daemon and the local/debian:{bullseye,bookworm,trixie} node images
	@bash scripts/lab/ensure-docker.sh && bash scripts/lab/build-images.sh

lab-up: setup lab-images  ## start (or keep) the lab's node containers
	@$(ACTIVATE) bash scripts/lab/lab.sh up

lab-down:         ## remove the lab's node containers (caches are kept)
	@bash scripts/lab/lab.sh down

lab-status:       ## what the lab runs now
	@bash scripts/lab/lab.sh status

lab: lab-up       ## the main job on the embedded default: bring the lab up and converge it
	@$(ACTIVATE) bash scripts/lab/lab.sh converge

check: setup      ## site.yml --check --diff against the lab
	@$(ACTIVATE) ansible-playbook site.yml --check --diff

render: setup     ## render every file for INVENTORY into RENDER_DIR without touching hosts
	@$(ACTIVATE) ansible-playbook playbooks/render.yml -i $(or $(INVENTORY),inventories/lab/hosts.yml) \
	  -e render_dir=$(abspath $(or $(RENDER_DIR),render))

test:             ## every test: lint, unit, the same on ansible-core 2.16, molecule, the lab twice
	@bash scripts/test.sh

lint: setup
	@bash scripts/test.sh lint

unit: setup
	@bash scripts/test.sh unit

compat:           ## lint, unit and render tests on ansible-core 2.16
	@bash scripts/test.sh compat
