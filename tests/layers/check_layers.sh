#!/usr/bin/env bash
# The layer rule of src/ARCHITECTURE.md ("Layers"), checked two ways:
#   includes: a file under src/ or runtime/ includes only headers of its own layer or lower;
#   calls:    (with an object directory) an object file's undefined symbols are defined only
#             in objects of its own layer or lower, so no call runs upward either.
# Usage: check_layers.sh SOURCE_DIR [OBJECT_DIR]. Exits 1 and lists every violation.
set -euo pipefail
root=$1
objdir=${2:-}
doc=$root/src/ARCHITECTURE.md

# The layers, lowest first, as the block between "<!-- layers -->" markers in the doc lists
# them: one line per layer, "rank: path path ...". A path is a folder of the tree or a public
# header (include/tgc/x.h counts as the layer that implements it).
layers=$(sed -n '/<!-- layers -->/,/<!-- \/layers -->/p' "$doc" | grep -E '^[0-9]+:' || true)
if [ -z "$layers" ]; then
    echo "check_layers: no layer list between <!-- layers --> markers in $doc" >&2
    exit 1
fi

rank_of() { # path relative to the root -> rank, or empty
    local f=$1 best="" bestlen=0
    while read -r line; do
        local r=${line%%:*}
        for p in ${line#*:}; do
            case "$f" in
            "$p" | "$p"/*)
                if [ ${#p} -gt $bestlen ]; then best=$r bestlen=${#p}; fi ;;
            esac
        done
    done <<<"$layers"
    echo "$best"
}

declare -A rank
files=$(cd "$root" && find src runtime include -name '*.[ch]' 2>/dev/null | sort || true)
for f in $files; do
    r=$(rank_of "$f")
    if [ -z "$r" ]; then
        echo "check_layers: $f belongs to no layer of $doc" >&2
        exit 1
    fi
    rank[$f]=$r
done

bad=0
for f in $files; do
    case $f in include/*) continue ;; esac
    while read -r inc; do
        [ -z "$inc" ] && continue
        target=""
        for cand in "src/$inc" "$inc" "include/$inc" "$(dirname "$f")/$inc"; do
            if [ -n "${rank[$cand]+x}" ]; then target=$cand; break; fi
        done
        [ -z "$target" ] && continue # generated or not ours (ops.def is in ir/)
        if [ "${rank[$target]}" -gt "${rank[$f]}" ]; then
            echo "upward include: $f (layer ${rank[$f]}) includes $inc (layer ${rank[$target]})"
            bad=1
        fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$root/$f")
done

if [ -n "$objdir" ]; then
    declare -A def_rank def_file
    objs=$(find "$objdir" -name '*.c.o' | sort)
    for o in $objs; do
        src=${o#"$objdir"/}
        src=${src%.o}
        r=${rank[$src]:-}
        [ -z "$r" ] && continue
        while read -r sym; do
            def_rank[$sym]=$r
            def_file[$sym]=$src
        done < <(nm --defined-only -g "$o" | awk '$2 ~ /[TDBRV]/ {print $3}')
    done
    for o in $objs; do
        src=${o#"$objdir"/}
        src=${src%.o}
        r=${rank[$src]:-}
        [ -z "$r" ] && continue
        while read -r sym; do
            dr=${def_rank[$sym]:-}
            if [ -n "$dr" ] && [ "$dr" -gt "$r" ]; then
                echo "upward call: $src (layer $r) calls $sym of ${def_file[$sym]} (layer $dr)"
                bad=1
            fi
        done < <(nm -u "$o" | awk '{print $2}')
    done
fi
if [ $bad -ne 0 ]; then
    echo "check_layers: the files above break the layer order of src/ARCHITECTURE.md" >&2
    exit 1
fi
echo "check_layers: every include${objdir:+ and call} runs to the same or a lower layer"
