#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# module/compat/probe.sh, with this machine's compiler, on probes of our
# own against a header and a Module.symvers of our own: a probe that
# compiles says yes only if the kernel exports what it needs outside a
# namespace (weak references aside; without a Module.symvers, if it
# compiles, as the log says), a "no" says why in the header and, with the
# compiler's words, in the log, and the depfile names every header read,
# for fixdep.
#
# Usage: compat_probe_test.sh

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=testlib/ktap.sh
. "$here/../testlib/ktap.sh"
probe_sh=$here/../module/compat/probe.sh
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/inc"
cat > "$dir/inc/api.h" <<'H'
int exported_fn(void);
int hidden_fn(void);
int ns_fn(void);
extern int weak_fn(void) __attribute__((weak));
static inline int inline_fn(void) { return 1; }
H
probe_c() { printf '#include <api.h>\nint tscfk_probe(void);\nint tscfk_probe(void) { return %s; }\n' "$2" > "$dir/$1.c"; }
probe_c exported 'exported_fn()'
probe_c hidden 'hidden_fn()'
probe_c inline_only 'inline_fn()'
probe_c missing_api 'undeclared_fn()'
probe_c namespaced 'ns_fn()'
probe_c weak 'weak_fn ? weak_fn() : 0'
printf '0x12345678\t%s\tvmlinux\tEXPORT_SYMBOL_GPL\t%s\n' exported_fn "" ns_fn SOME_NS \
	> "$dir/Module.symvers"

# run SYMVERS: probe.sh on the probes, into $dir/out.h, as a fresh file.
run() {
	rm -f "$dir"/out.*
	sh "$probe_sh" "$dir/out.h" "$dir/out.d" "$1" \
		"$dir"/{exported,hidden,inline_only,missing_api,namespaced,weak}.c -- \
		"${CC:-cc}" -I"$dir/inc" -O2 -fno-pic -fno-stack-protector ||
		echo "probe.sh exited with $?"
}
answer() { grep -E "TSCFK_HAVE_$1( |:)" "$dir/out.h"; }

ktap_plan 13
out=$(run "$dir/Module.symvers")
ktap_check "probe.sh succeeds${out:+: $out}" test -z "$out"
ktap_check "an exported symbol: yes" test "$(answer EXPORTED)" = "#define TSCFK_HAVE_EXPORTED 1"
ktap_check "declared, not exported: no, and which" \
	test "$(answer HIDDEN)" = "/* TSCFK_HAVE_HIDDEN: no: not exported: hidden_fn */"
ktap_check "inline only, nothing to export: yes" test "$(answer INLINE_ONLY)" = "#define TSCFK_HAVE_INLINE_ONLY 1"
ktap_check "does not compile: no" \
	test "$(answer MISSING_API)" = "/* TSCFK_HAVE_MISSING_API: no: does not compile */"
ktap_check "exported in a namespace: no" \
	test "$(answer NAMESPACED)" = "/* TSCFK_HAVE_NAMESPACED: no: not exported: ns_fn */"
ktap_check "a weak reference needs no export: yes" test "$(answer WEAK)" = "#define TSCFK_HAVE_WEAK 1"
ktap_check "the log keeps the compiler's words" grep -q "undeclared_fn" "$dir/out.h.log"
ktap_check "the log says what a probe needs" grep -qx "needs: exported_fn" "$dir/out.h.log"
# shellcheck disable=SC2016 # expanded by the inner shell
ktap_check "the depfile: the output first, then the header read" \
	sh -c 'head -c 200 "$1" | grep -q "^$2: " && grep -q "inc/api.h" "$1"' - "$dir/out.d" "$dir/out.h"
run "$dir/absent.symvers" > /dev/null
ktap_check "no Module.symvers: compiling is the answer" \
	test "$(answer HIDDEN)" = "#define TSCFK_HAVE_HIDDEN 1"
ktap_check "no Module.symvers: the log says so" \
	grep -q "exports unknown (.*absent.symvers unreadable)" "$dir/out.h.log"
NM=false run "$dir/Module.symvers" > /dev/null
ktap_check "nm fails: no, and why" test "$(answer INLINE_ONLY)" = "/* TSCFK_HAVE_INLINE_ONLY: no: false failed */"
ktap_finish
