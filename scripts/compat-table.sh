#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The compat probes' answers (module/compat/probe.sh) for every kernel
# built, in one table: a probe per row, a column per set of kernels that
# answered alike, y for yes.  Each build's compat-probes.h.log says why
# a probe said no.
#
# Usage: compat-table.sh BUILD/kbuild/KERNEL/tsc_freq_khz/module/compat-probes.h...
set -eu

declare -A members
order=() all=""
letters=(A B C D E F G H I J K L M N O P Q R S T U V W X Y Z)
for h in "$@"; do
	kernel=$(basename "$(dirname "$(dirname "$(dirname "$h")")")")
	# A key never empty: a kernel may answer no to every probe.
	yes="k: $(sed -n 's/^#define TSCFK_HAVE_\([A-Z0-9_]*\) 1$/\1/p' "$h" | tr '\n' ' ')"
	if [[ ! -v "members[$yes]" ]]; then
		order+=("$yes")
		members[$yes]=""
	fi
	members[$yes]+=" $kernel"
	all+=" $(sed -n 's/^\(#define\|\/\*\) TSCFK_HAVE_\([A-Z0-9_]*\)[ :].*/\2/p' "$h" | tr '\n' ' ')"
done
[ ${#order[@]} -gt 0 ] || { echo "compat-table.sh: no compat-probes.h given" >&2; exit 2; }
mapfile -t probes < <(tr ' ' '\n' <<< "$all" | sed '/^$/d' | sort -u)

echo "compat probes: y where the kernels of the column have the API (why not: each build's module/compat-probes.h.log)"
printf '  %-26s' probe
for i in "${!order[@]}"; do printf ' %s' "${letters[i]}"; done
echo
for p in "${probes[@]}"; do
	printf '  %-26s' "$p"
	for yes in "${order[@]}"; do
		case " $yes" in *" $p "*) printf ' y' ;; *) printf ' -' ;; esac
	done
	echo
done
for i in "${!order[@]}"; do
	echo "  ${letters[i]}:${members[${order[$i]}]}"
done
