#!/bin/sh
# make setup: the Debian packages make test needs (Node.js with npm for the
# packaging and conformance scripts and the npm installs; Chromium at $1 for
# make server-e2e's browser flow), installed with apt-get when missing. Not
# root, or not Debian: it stops at once and prints the command to run.
set -eu
chromium=$1
missing=
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	missing="$missing nodejs npm"
fi
if [ ! -x "$chromium" ]; then
	missing="$missing chromium"
fi
if [ -z "$missing" ]; then
	exit 0
fi
cmd="apt-get update && apt-get install -y$missing"
if ! command -v apt-get >/dev/null 2>&1; then
	echo "make setup: make test needs what Debian calls$missing (Chromium at $chromium, or pass CHROMIUM=<path>), and this is not a Debian system: install them with its own packages (on Debian, as root: $cmd)" >&2
	exit 2
fi
if [ "$(id -u)" != 0 ]; then
	echo "make setup: make test needs the Debian packages$missing; install them as root: $cmd" >&2
	exit 2
fi
echo "make setup: installing the Debian packages$missing"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq$missing
if [ ! -x "$chromium" ]; then
	echo "make setup: the chromium package put no Chromium at $chromium; pass CHROMIUM=<its path>" >&2
	exit 2
fi
