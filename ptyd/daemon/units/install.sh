#!/bin/sh
# Install or remove ptyd's systemd user units.
#
#   install.sh install     copy ptyd.socket and ptyd.service to the user unit directory, with the service's
#                          ExecStart pointing at $PTYD_BIN, else at the checkout's .venv/bin/ptyd when this file is
#                          in a checkout, else at the ptyd on the PATH
#   install.sh uninstall   stop and disable both units if the user manager is reachable, then remove them
#
# `make install-user` runs it from a checkout; `ptyd install-user` runs the copy inside the installed package
# (ptyd/daemon/units/), with PTYD_BIN set to that ptyd.
#
# The unit directory is ${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user. Installing again replaces the units
# in place (enablement is kept) and never restarts a running daemon: that would close every session.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)  # the checkout, when this is ptyd/daemon/units of one
units="ptyd.socket ptyd.service"

say() { printf 'ptyd-install: %s\n' "$*"; }
die() { printf 'ptyd-install: error: %s\n' "$*" >&2; exit 1; }

unit_dir() {
	config=${XDG_CONFIG_HOME:-}
	case $config in
	/*) ;;
	*) config=$HOME/.config ;;  # the XDG spec says to ignore a relative XDG_CONFIG_HOME
	esac
	printf '%s/systemd/user\n' "$config"
}

# True when a user service manager answers, so daemon-reload and stop/disable mean something.
manager_reachable() {
	command -v systemctl >/dev/null 2>&1 && systemctl --user show-environment >/dev/null 2>&1
}

# The executable path as one word of a systemd command line: % doubled so that systemd expands no specifier in
# it, and double quotes around it when it has spaces. systemd expands no variables in the executable name, and
# it refuses one containing quotes or backslashes (ptyd_bin refuses those first).
exec_word() {
	escaped=$(printf '%s' "$1" | sed -e 's/%/%%/g')
	case $1 in
	*[[:space:]]*) printf '"%s"' "$escaped" ;;
	*) printf '%s' "$escaped" ;;
	esac
}

ptyd_bin() {
	bin=${PTYD_BIN:-}
	if [ -z "$bin" ]; then
		if [ -x "$repo/.venv/bin/ptyd" ]; then
			bin=$repo/.venv/bin/ptyd
		else
			bin=$(command -v ptyd 2>/dev/null) ||
				die "no ptyd found: run 'make venv' in a checkout, or set PTYD_BIN to an installed ptyd"
		fi
	fi
	case $bin in
	/*) ;;
	*) bin=$PWD/$bin ;;
	esac
	case $bin in
	*[[:cntrl:]]*) die "the ptyd path contains a control character" ;;
	*[\'\"\\]*) die "systemd refuses an executable path with quotes or backslashes: $bin (link it elsewhere)" ;;
	esac
	if [ ! -f "$bin" ] || [ ! -x "$bin" ]; then
		if [ -n "${PTYD_BIN:-}" ]; then
			die "PTYD_BIN=$bin is not an executable file"
		fi
		die "$bin is not an executable file: run 'make venv' first, or set PTYD_BIN to an installed ptyd"
	fi
	printf '%s\n' "$bin"
}

install_units() {
	bin=$(ptyd_bin)
	dir=$(unit_dir)
	mkdir -p "$dir"
	if [ "$(grep -c '^ExecStart=' "$here/ptyd.service")" != 1 ]; then
		die "$here/ptyd.service must have exactly one ExecStart= line"
	fi
	# Write beside the target and rename, so the manager never reads a half-written unit.
	cp "$here/ptyd.socket" "$dir/.ptyd.socket.tmp"
	PTYD_EXEC=$(exec_word "$bin") awk '
		/^ExecStart=/ { sub(/^ExecStart=[^ ]*/, ""); print "ExecStart=" ENVIRON["PTYD_EXEC"] $0; next }
		{ print }
	' "$here/ptyd.service" >"$dir/.ptyd.service.tmp"
	mv -f "$dir/.ptyd.socket.tmp" "$dir/ptyd.socket"
	mv -f "$dir/.ptyd.service.tmp" "$dir/ptyd.service"
	say "installed $dir/ptyd.socket and $dir/ptyd.service (ExecStart: $bin)"
	if manager_reachable; then
		systemctl --user daemon-reload
		say "reloaded the user manager"
		if systemctl --user --quiet is-active ptyd.service; then
			say "ptyd.service is running the previous version; 'systemctl --user restart ptyd.service' switches," \
				"closing every session"
		fi
		if ! systemctl --user --quiet is-enabled ptyd.socket 2>/dev/null; then
			say "next: systemctl --user enable --now ptyd.socket"
		fi
	else
		no_manager
	fi
}

# No user manager answers. Said before anyone runs 'systemctl --user enable --now', which in a container creates
# its symlink and then fails to start anything.
no_manager() {
	if [ -d /run/systemd/system ]; then
		say "no user service manager reachable (systemctl --user): in a login session of this machine, run" \
			"'systemctl --user daemon-reload' and 'systemctl --user enable --now ptyd.socket'."
		say "Without a login session:"
	else
		say "this system does not run systemd (a container?): 'systemctl --user enable --now ptyd.socket' would" \
			"fail here. Instead:"
	fi
	say "  run the daemon under your own supervisor: 'make run' (or '$bin' itself), in the foreground, logging to stderr;"
	say "  the sessions outlive a crash of the daemon there: its fd keeper holds them (fd_keeper, on by default;"
	say "  see the README's 'Without systemd')."
}

uninstall_units() {
	dir=$(unit_dir)
	if manager_reachable; then
		# Stopping the service closes every session; the socket goes too so nothing starts it again.
		systemctl --user disable --now $units 2>/dev/null || true
	fi
	# disable's job when no manager is reachable: the links 'enable' made for [Install] WantedBy=/Also=.
	for wants in "$dir"/*.wants "$dir"/*.requires; do
		for unit in $units; do
			if [ -L "$wants/$unit" ]; then
				rm -f "$wants/$unit"
			fi
		done
	done
	removed=
	for unit in $units; do
		if [ -e "$dir/$unit" ]; then
			rm -f "$dir/$unit"
			removed="$removed $unit"
		fi
	done
	if manager_reachable; then
		systemctl --user daemon-reload
		systemctl --user reset-failed $units 2>/dev/null || true
	fi
	if [ -n "$removed" ]; then
		say "removed$removed from $dir"
	else
		say "nothing to remove in $dir"
	fi
}

case ${1:-} in
install) install_units ;;
uninstall) uninstall_units ;;
*)
	printf 'usage: %s install|uninstall\n' "$0" >&2
	exit 2
	;;
esac
