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

# Few processes (a fork each per file and include made this take minutes on a loaded machine):
# the rank lookup is plain bash, the includes come from one sed and the symbols from one nm.
rank_of() { # path relative to the root -> $rank_found (the rank, or empty)
    local f=$1 bestlen=0 line r p
    rank_found=""
    while read -r line; do
        r=${line%%:*}
        for p in ${line#*:}; do
            case "$f" in
            "$p" | "$p"/*)
                if [ ${#p} -gt "$bestlen" ]; then rank_found=$r bestlen=${#p}; fi ;;
            esac
        done
    done <<<"$layers"
}

declare -A rank
files=$(cd "$root" && find src runtime include -name '*.[ch]' 2>/dev/null | sort || true)
for f in $files; do
    rank_of "$f"
    if [ -z "$rank_found" ]; then
        echo "check_layers: $f belongs to no layer of $doc" >&2
        exit 1
    fi
    rank[$f]=$rank_found
done

bad=0
srcs=()
for f in $files; do
    case $f in include/*) ;; *) srcs+=("$f") ;; esac
done
# "file<TAB>included name" for every quoted include of every source, in file order
while IFS=$'\t' read -r f inc; do
    [ -z "$inc" ] && continue
    target=""
    for cand in "src/$inc" "$inc" "include/$inc" "${f%/*}/$inc"; do
        if [ -n "${rank[$cand]+x}" ]; then target=$cand; break; fi
    done
    [ -z "$target" ] && continue # generated or not ours (ops.def is in ir/)
    if [ "${rank[$target]}" -gt "${rank[$f]}" ]; then
        echo "upward include: $f (layer ${rank[$f]}) includes $inc (layer ${rank[$target]})"
        bad=1
    fi
done < <(cd "$root" && [ ${#srcs[@]} -gt 0 ] && awk '
    match($0, /^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*"/) {
        s = substr($0, RSTART, RLENGTH); sub(/^[^"]*"/, "", s); sub(/"$/, "", s)
        printf "%s\t%s\n", FILENAME, s
    }' "${srcs[@]}")

if [ -n "$objdir" ]; then
    declare -A def_rank def_file
    mapfile -t objs < <(find "$objdir" -name '*.c.o' | sort)
    src_of() { # object path -> $src (relative source path) and $r (its rank, or empty)
        src=${1#"$objdir"/}
        src=${src%.o}
        r=${rank[$src]:-}
    }
    if [ ${#objs[@]} -gt 0 ]; then
        # nm -A -P: "object: symbol type [value size]"
        while read -r o sym type _; do
            case $type in [TDBRV]) ;; *) continue ;; esac
            src_of "${o%:}"
            [ -z "$r" ] && continue
            def_rank[$sym]=$r
            def_file[$sym]=$src
        done < <(nm -A -P --defined-only -g "${objs[@]}")
        while read -r o sym _; do
            src_of "${o%:}"
            [ -z "$r" ] && continue
            dr=${def_rank[$sym]:-}
            if [ -n "$dr" ] && [ "$dr" -gt "$r" ]; then
                echo "upward call: $src (layer $r) calls $sym of ${def_file[$sym]} (layer $dr)"
                bad=1
            fi
        done < <(nm -A -P -u "${objs[@]}")
    fi
fi
if [ $bad -ne 0 ]; then
    echo "check_layers: the files above break the layer order of src/ARCHITECTURE.md" >&2
    exit 1
fi
echo "check_layers: every include${objdir:+ and call} runs to the same or a lower layer"
