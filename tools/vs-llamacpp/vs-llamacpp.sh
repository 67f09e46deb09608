#!/usr/bin/env bash
# vs-llamacpp: picometer and llama.cpp side by side on the same GGUF files.
#
#   tools/vs-llamacpp/vs-llamacpp.sh MODEL.gguf...
#
# llama.cpp's llama-bench and llama-batched-bench come from build/llama.cpp-bin
# (make llamacpp builds them from the vendored source), or from
# $LLAMA_CPP_DIR/build/bin when LLAMA_CPP_DIR names another checkout, or
# from $LLAMA_CPP_BIN when set (e.g. build/llama.cpp-avx2-bin, which make
# llamacpp-avx2 builds for any AVX2 CPU: the peer of PM_KERNEL=avx2 on a
# CPU with AVX-512). For each model the two engines
# run alternately, PAIRS times each (default 5), on the same file (a copy
# whose tokenizer.ggml.model says "llama": llama.cpp refuses picometer's
# byte vocabulary; the tensors are the same bytes). Printed per measurement:
# the median tokens/s of each and picometer/llama.cpp:
#   tg128 at batch 1 with 1 and 2 threads (llama-bench -n 128 / pmbench -mode tg)
#   pp256 with 1 and 2 threads            (llama-bench -p 256 / pmbench -mode pp)
#   batched generation at 8 and 16        (llama-batched-bench S_TG / pmbench -mode tg -batch N),
#                                          BATCH_THREADS threads (default 1)
# and, for every decode cell, each engine's share of the measured read
# bandwidth: the bytes of weights one decode step reads (matrixbytes) times
# steps/s (tokens/s at batch 1; tokens/s / b batched), over BW_1 (one
# thread) or BW_2 (two), bytes/s. Unset, each is measured here first
# (pmbench -mode bw: a 512 MiB buffer in 2 MiB pages read by 1 or 2
# threads, best of 5)
# and printed, and measured again after each model (a figure that moved
# says how far the shares can be trusted); on a shared machine set them
# from a quiet moment.
# PM_KERNEL picks picometer's kernel path (pmbench -kernel: auto,
# avx512vnni, avxvnni, avx2, neon or portable; default auto, e.g. avx2 to
# force the AVX2 path on an AVX-512 machine, neon only on ARM64). Both engines time warm runs: llama-bench
# runs one untimed prompt (and one token) before its repetition, pmbench
# one untimed prefill before pp and the prompts and first step before tg.
# A run that gives no number (llama-batched-bench has come back without
# its table on a busy machine) is left out of the median and counted on a
# line below the measurement, with llama.cpp's last stderr lines; a
# measurement with no number at all says "failed". The load average is
# printed before and after each model.
# CELLS picks the measurements (default "tg pp batched", all): a
# space-separated subset of tg (tg128 b=1 at t=1 and t=2), pp (pp256 at
# t=1 and t=2) and batched (b=8 and b=16); batched cells take long on a 1B
# model, e.g. CELLS=tg for a DRAM decode row. An unknown word is refused.
# Without the binaries it says so and exits 0:
# CI does not need it.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=build/llama.cpp-bin
[[ -n ${LLAMA_CPP_DIR:-} ]] && bin=$LLAMA_CPP_DIR/build/bin
[[ -n ${LLAMA_CPP_BIN:-} ]] && bin=$LLAMA_CPP_BIN
if [[ ! -x $bin/llama-bench || ! -x $bin/llama-batched-bench ]]; then
	echo "vs-llamacpp: skipped: no llama-bench and llama-batched-bench in $bin (make llamacpp builds them there, or set LLAMA_CPP_DIR to a llama.cpp checkout with both built in build/bin)"
	exit 0
fi
if [[ $# -lt 1 ]]; then
	echo "usage: [LLAMA_CPP_DIR=DIR] $0 MODEL.gguf..." >&2
	exit 2
fi
pairs=${PAIRS:-5}
cells=${CELLS:-tg pp batched}
for c in $cells; do
	case $c in
	tg | pp | batched) ;;
	*)
		echo "vs-llamacpp: CELLS: unknown cell \"$c\" (want a subset of: tg pp batched)" >&2
		exit 2
		;;
	esac
done
want() { [[ " $cells " == *" $1 "* ]]; }
bt=${BATCH_THREADS:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/pmbench" ./native/cmd/pmbench
go build -o "$tmp/retok" ./tools/vs-llamacpp/retok
go build -o "$tmp/matrixbytes" ./tools/vs-llamacpp/matrixbytes
kernel=${PM_KERNEL:-auto}
bw_here=0
[[ -z ${BW_1:-} || -z ${BW_2:-} ]] && bw_here=1
if [[ -z ${BW_1:-} ]]; then
	BW_1=$("$tmp/pmbench" -mode bw -threads 1)
	echo "BW_1 measured: $BW_1 bytes/s (one thread; in 4 KiB pages, for reference: $("$tmp/pmbench" -mode bw -threads 1 -pages 4k))"
fi
if [[ -z ${BW_2:-} ]]; then
	BW_2=$("$tmp/pmbench" -mode bw -threads 2)
	echo "BW_2 measured: $BW_2 bytes/s (two threads; in 4 KiB pages, for reference: $("$tmp/pmbench" -mode bw -threads 2 -pages 4k))"
fi
echo "llama.cpp: $bin -> $(readlink -f "$bin")"
echo "picometer kernel: $("$tmp/pmbench" -model "$1" -mode pp -n 8 -kernel "$kernel" -v 2>&1 >/dev/null | sed -n 's/^pmbench: kernel //p'); CPU flags: $(grep -m1 '^flags' /proc/cpuinfo | grep -o -w 'avx2\|fma\|f16c\|avx512f\|avx512vl\|avx512bw\|avx512vnni\|avx_vnni' | tr '\n' ' ')"

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.2f\n", (a[NR/2]+a[NR/2+1])/2}'; }
# med: the median of the numbers among its arguments (a run that failed
# gave none), "failed" when there is none.
med() {
	local v
	v=$(printf '%s\n' "$@" | grep -E '^[0-9]+([.][0-9]+)?$' || true)
	if [[ -z $v ]]; then echo failed; else median <<<"$v"; fi
}
# failures: how many of its arguments are not a number.
failures() { printf '%s\n' "$@" | grep -cvE '^[0-9]+([.][0-9]+)?$' || true; }

# llama-bench prints CSV with avg_ts as the throughput column.
llama_bench() { # model threads p n
	"$bin/llama-bench" -m "$1" -t "$2" -p "$3" -n "$4" -r 1 -o csv 2>"$tmp/llama.err" |
		awk -F, 'NR==1 {for (i=1;i<=NF;i++) if ($i ~ /avg_ts/) c=i; next} {gsub(/"/,"",$c); print $c}' | tail -1
}
# llama-batched-bench prints a markdown table; S_TG t/s is column 9 (| split).
llama_batched() { # model threads npl
	local ctx=$(($3 * 136 + 64))
	"$bin/llama-batched-bench" -m "$1" -t "$2" -c "$ctx" -b 2048 -ub 512 -npp 8 -ntg 128 -npl "$3" 2>"$tmp/llama.err" |
		awk -F'|' -v b="$3" '$4+0 == b && $2+0 == 8 {gsub(/ /,"",$9); print $9}' | tail -1
}

for model in "$@"; do
	copy=$tmp/$(basename "$model")
	"$tmp/retok" "$model" "$copy"
	mb=$("$tmp/matrixbytes" "$copy")
	echo "== $(basename "$model") ($(stat -c %s "$model") bytes; $mb bytes of weights read per token; load average $(cut -d' ' -f1-3 /proc/loadavg))"
	printf '%-22s %12s %12s %8s %10s %10s\n' measurement llama.cpp picometer ratio bw_llama bw_pico
	run() { # name llama-cmd pico-cmd [threads for bandwidth] [batch]
		local name=$1 lc=$2 pc=$3 t=${4:-} b=${5:-1} l=() p=()
		for ((i = 0; i < pairs; i++)); do
			l+=("$(eval "$lc")")
			p+=("$(eval "$pc")")
		done
		local lm pm
		lm=$(med "${l[@]}")
		pm=$(med "${p[@]}")
		local bwl="" bwp=""
		if [[ -n $t && $lm != failed && $pm != failed ]]; then
			local lim=$BW_2
			[[ $t == 1 ]] && lim=$BW_1
			bwl=$(awk -v r="$lm" -v s="$b" -v b="$mb" -v l="$lim" 'BEGIN {printf "%.2f", r/s*b/l}')
			bwp=$(awk -v r="$pm" -v s="$b" -v b="$mb" -v l="$lim" 'BEGIN {printf "%.2f", r/s*b/l}')
		fi
		printf '%-22s %12s %12s %7sx %10s %10s\n' "$name" "$lm" "$pm" \
			"$(awk -v a="$pm" -v b="$lm" 'BEGIN {if (a > 0 && b > 0) printf "%.2f", a/b; else print "?"}')" "$bwl" "$bwp"
		local fl fp
		fl=$(failures "${l[@]}")
		fp=$(failures "${p[@]}")
		if ((fl + fp > 0)); then
			echo "  ($name: $fl of $pairs llama.cpp and $fp of $pairs picometer runs gave no number; the medians are of the rest)"
			[[ $fl -gt 0 && -s $tmp/llama.err ]] && tail -n 3 "$tmp/llama.err" | sed 's/^/  llama.cpp: /'
		fi
	}
	want tg && for t in 1 2; do
		run "tg128 b=1 t=$t" "llama_bench '$copy' $t 0 128" "'$tmp/pmbench' -model '$copy' -kernel $kernel -threads $t -mode tg -batch 1 -n 128" "$t"
	done
	want pp && for t in 1 2; do
		run "pp256 t=$t" "llama_bench '$copy' $t 256 0" "'$tmp/pmbench' -model '$copy' -kernel $kernel -threads $t -mode pp -n 256"
	done
	want batched && for b in 8 16; do
		run "batched tg b=$b t=$bt" "llama_batched '$copy' $bt $b" "'$tmp/pmbench' -model '$copy' -kernel $kernel -threads $bt -mode tg -batch $b -n 128" "$bt" "$b"
	done
	# the probe again when it was measured here: a figure that moved
	# since the first says how far the shares above can be trusted
	again=""
	[[ $bw_here == 1 ]] && again="; bandwidth now $("$tmp/pmbench" -mode bw -threads 1) one thread, $("$tmp/pmbench" -mode bw -threads 2) two"
	echo "   (load average after: $(cut -d' ' -f1-3 /proc/loadavg)$again)"
done
