#!/usr/bin/env bash
# The layer rule of src/ARCHITECTURE.md ("Layers"), checked three ways:
#   includes: a file under src/ or runtime/ includes only headers of its own layer or lower;
#   calls:    (with an object directory) an object file's undefined symbols are defined only
#             in objects of its own layer or lower, so no call runs upward either;
#   circles:  (with an object directory) the files, by the symbols they take from each other
#             ("A takes a symbol B defines"), form no circle, inside a layer too: every
#             strongly connected component of that graph with more than one file must be
#             exactly one of the circles the doc declares between "<!-- circles -->" markers
#             (one per line, "name: file file ..."; a declared circle with a file this build
#             does not compile is skipped, one with a file the tree lacks is an error).
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

# The declared circles, as the layers: "name: file file ..." lines between the markers.
circles=$(sed -n '/<!-- circles -->/,/<!-- \/circles -->/p' "$doc" | grep -E '^[A-Za-z0-9_-]+:' || true)

if [ -n "$objdir" ]; then
    declare -A def_rank def_file
    links=() # "D name files", "F file" (of the tree), "O file" (built), "E from to symbol"
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
            [ -n "$dr" ] && [ "${def_file[$sym]}" != "$src" ] && links+=("E $src ${def_file[$sym]} $sym")
        done < <(nm -A -P -u "${objs[@]}")
        for o in "${objs[@]}"; do
            src_of "$o"
            [ -n "$r" ] && links+=("O $src")
        done
        for f in $files; do links+=("F $f"); done
        while read -r line; do
            [ -n "$line" ] && links+=("D ${line%%:*} ${line#*:}")
        done <<<"$circles"
        # Tarjan's strongly connected components over "from takes a symbol to defines", then
        # each component of two files or more against the declared circles.
        printf '%s\n' "${links[@]}" | awk -v doc="src/ARCHITECTURE.md" '
            function sorted_key(arr, n,    i, j, t, k) { # arr[1..n] sorted in place, joined
                for (i = 2; i <= n; i++)
                    for (j = i; j > 1 && arr[j - 1] > arr[j]; j--) {
                        t = arr[j]; arr[j] = arr[j - 1]; arr[j - 1] = t
                    }
                k = ""
                for (i = 1; i <= n; i++) k = k (i > 1 ? " " : "") arr[i]
                return k
            }
            function strong(v,    i, w, n, m) {
                idx[v] = low[v] = ++counter
                stack[++sp] = v; onstack[v] = 1
                for (i = 1; i <= deg[v]; i++) {
                    w = adj[v, i]
                    if (!(w in idx)) {
                        strong(w)
                        if (low[w] < low[v]) low[v] = low[w]
                    } else if (onstack[w] && idx[w] < low[v])
                        low[v] = idx[w]
                }
                if (low[v] != idx[v]) return
                n = 0
                do { w = stack[sp--]; onstack[w] = 0; m[++n] = w } while (w != v)
                if (n < 2) return
                ncomp++
                comp_n[ncomp] = n
                for (i = 1; i <= n; i++) { comp_m[ncomp, i] = m[i]; comp_of[m[i]] = ncomp }
                for (i = 1; i <= n; i++) tmp[i] = m[i]
                comp_key[ncomp] = sorted_key(tmp, n)
                for (i = 1; i <= n; i++) comp_m[ncomp, i] = tmp[i]
            }
            $1 == "F" { in_tree[$2] = 1; next }
            $1 == "O" { if (!($2 in built)) { built[$2] = 1; order[++nnodes] = $2 }; next }
            $1 == "D" {
                nd++; dname[nd] = $2; dn[nd] = NF - 2
                for (i = 3; i <= NF; i++) dfile[nd, i - 2] = $i
                next
            }
            $1 == "E" {
                if (!(($2, $3) in has_edge)) { has_edge[$2, $3] = 1; adj[$2, ++deg[$2]] = $3 }
                if (nsym[$2, $3] < 3) esym[$2, $3] = esym[$2, $3] " " $4
                nsym[$2, $3]++
                next
            }
            END {
                for (i = 1; i <= nnodes; i++) if (!(order[i] in idx)) strong(order[i])
                for (d = 1; d <= nd; d++) { # the declared circles this build compiles
                    n = 0; skip = 0
                    for (i = 1; i <= dn[d]; i++) {
                        f = dfile[d, i]
                        if (!(f in in_tree)) {
                            printf "declared circle %s names %s, which is not a file of the tree\n", dname[d], f
                            bad = 1
                        }
                        if (!(f in built)) skip = 1
                        tmp[++n] = f
                    }
                    dkey[d] = skip ? "" : sorted_key(tmp, n)
                }
                for (c = 1; c <= ncomp; c++) {
                    ok = 0
                    for (d = 1; d <= nd; d++) if (dkey[d] == comp_key[c]) { ok = d; seen[d] = 1 }
                    if (ok) {
                        printf "declared circle %s: %d files\n", dname[ok], comp_n[c]
                        continue
                    }
                    printf "circle of %d files (not a circle %s declares): %s\n", comp_n[c], doc, comp_key[c]
                    for (i = 1; i <= comp_n[c]; i++) {
                        a = comp_m[c, i]
                        for (j = 1; j <= deg[a]; j++) {
                            b = adj[a, j]
                            if (comp_of[b] == c)
                                printf "  %s takes%s%s of %s\n", a, esym[a, b], (nsym[a, b] > 3 ? " ..." : ""), b
                        }
                    }
                    bad = 1
                }
                for (d = 1; d <= nd; d++)
                    if (dkey[d] != "" && !seen[d]) {
                        printf "declared circle %s is no longer one circle of this build (its files do not all reach each other by the symbols they take): update %s\n", dname[d], doc
                        bad = 1
                    }
                exit bad
            }' || bad=1
    fi
fi
if [ $bad -ne 0 ]; then
    echo "check_layers: the files above break the layer order of src/ARCHITECTURE.md, or form a circle it does not declare" >&2
    exit 1
fi
echo "check_layers: every include${objdir:+ and call} runs to the same or a lower layer${objdir:+, and no files but the declared ones form a circle}"
