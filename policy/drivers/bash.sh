# airlock's session driver for bash (see policy/drivers.go for the protocol).
#
# It runs in the sandbox as the program and is as untrusted as the code it runs: the
# server enforces every limit and decides every status from outside. This shell is the
# supervisor: it reads the session's key, says "ready", and runs the worker in a
# subshell, again whenever it ends (a call's exit, a kill), saying "restart"; a worker
# that exits 199 found stdin closed by the server, and the supervisor ends too. The
# worker evals each call in a function of its own shell, so variables and the working
# directory persist; SIGINT returns from that function, keeping them.
__airlock_key=
IFS= read -r __airlock_key || exit 0
__airlock_token=$'\036'AIRLOCK-$__airlock_key:
__airlock_mark() {
	printf '%s%s\n' "$__airlock_token" "$1"
	printf '%s%s\n' "$__airlock_token" "$1" >&2
}
rm -f -- "$0" 2>/dev/null
exec 9<&0 0</dev/null

__airlock_run() { eval "$__airlock_code"; }
__airlock_worker() {
	# Only a running call returns on SIGINT; one that comes late finds nothing to stop.
	trap '[[ -n $__airlock_busy ]] && return 130' INT
	local __h __seq __nc __ni __in
	__airlock_mark up
	while :; do
		IFS= read -r -u 9 __h || { (($? > 128)) && continue; exit 199; }
		[[ $__h == "${__airlock_token}call:"* ]] || continue
		IFS=: read -r __seq __nc __ni <<<"${__h#"${__airlock_token}call:"}"
		__airlock_code= __in=
		if ((__nc > 0)); then LC_ALL=C IFS= read -r -d '' -N "$__nc" -u 9 __airlock_code; fi
		if ((__ni > 0)); then LC_ALL=C IFS= read -r -d '' -N "$__ni" -u 9 __in; fi
		printf '%s' "$__in" >"${TMPDIR:-/tmp}/.airlock-stdin"
		__airlock_busy=1
		__airlock_run <"${TMPDIR:-/tmp}/.airlock-stdin"
		__rc=$?
		__airlock_busy=
		__airlock_mark "end:$__seq:$__rc"
	done
}
__airlock_mark "ready:$$"
while :; do
	(__airlock_worker)
	__st=$?
	((__st == 199)) && exit 0 # the server closed the session's stdin
	if ((__st > 128)); then __airlock_mark "restart:signal:$((__st - 128))"; else __airlock_mark "restart:exit:$__st"; fi
done
