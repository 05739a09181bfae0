#!/bin/sh
# zero/README.md's index names where things are; this holds it to the code
# (CTest: readme_index), so that it cannot rot. In the index's table each
# "where" cell is groups of `path`: `symbol`, ... -- a path under zero/ (or the
# top-level train_gpt2_zero.cu), then what is defined in it: `Class::member`
# (the file defines Class and has member(...)), or `function`. The Files table's
# paths must exist too. (A definition is a line with a type before the name's
# parenthesis; a call, `x = f(`, `a.f(`, `return f(`, is not one.)
#
#   sh dev/check_index.sh [REPO_ROOT]      exit 0: every name is where it says; 1: each miss on a line
set -u
cd "${1:-$(dirname "$0")/..}" || exit 2
readme=zero/README.md
status=0
miss() { echo "zero/README.md: $*"; status=1; }
path_of() { case $1 in train_gpt2_zero.cu) echo "$1" ;; *) echo "zero/$1" ;; esac; }
# FILE defines function NAME: a line with a type before `NAME(` (a call has `=`, `.`, `->` or a keyword there)
defines() {
    grep -E "^[[:space:]]*([A-Za-z_][A-Za-z0-9_:<>,]*[*&]*[[:space:]]+)+[*&]?$2[[:space:]]*\(" "$1" |
        grep -Evq "^[[:space:]]*(return|else|if|for|while|switch|case|throw|delete|new)[[:space:](]"
}

rows=$(awk '/^## Where it happens: the index/ { on = 1; next } /^## / { on = 0 } on && /^\| / && !/^\| what/' "$readme")
[ -n "$rows" ] || miss "no index table under '## Where it happens: the index'"
n=0
echo "$rows" | while IFS= read -r row; do
    where=$(printf '%s\n' "$row" | awk -F'|' '{ print $4 }')
    file=""
    # the backticked names of the cell, in order; a path ends with its ':'
    for name in $(printf '%s\n' "$where" | grep -o '`[^`]*`:\{0,1\}' | tr -d '`' | tr ' ' '_'); do
        case $name in
        *.h: | *.h | *.cu: | *.cu | *.cpp: | *.cpp | *.cuh: | *.cuh)
            file=$(path_of "${name%:}")
            [ -f "$file" ] || miss "the index names $file, which does not exist"
            ;;
        *)
            sym=${name%()}
            if [ -z "$file" ] || [ ! -f "$file" ]; then miss "\`$sym\` comes before its file in: $row"; continue; fi
            case $sym in
            *::*)
                cls=${sym%%::*} member=${sym#*::}
                grep -Eq "^(template <[^>]*> *)?(class|struct) $cls\b" "$file" ||
                    grep -Eq "(class|struct) $cls\b" "$file" || miss "$file defines no $cls (the index names $sym)"
                defines "$file" "$member" || miss "$file defines no $member(...) (the index names $sym)"
                ;;
            *) defines "$file" "$sym" || miss "$file defines no $sym(...) (the index names it)" ;;
            esac
            ;;
        esac
    done
    [ "$status" = 0 ] || exit 1
done || status=1

files=$(awk '/^## Files/ { on = 1; next } /^## / { on = 0 } on && /^\| `/' "$readme" | awk -F'|' '{ print $2 }')
dir=""
for name in $(printf '%s\n' "$files" | grep -o '`[^`]*`' | tr -d '`'); do
    case $name in */*) dir=${name%/*} ;; *) name=$dir/$name ;; esac
    case $name in reproduce/\*) continue ;; esac
    found=""
    for f in zero/$name; do [ -f "$f" ] && found=1; done
    [ -n "$found" ] || miss "the Files table names zero/$name, which does not exist"
done
[ "$status" = 0 ] && echo "zero/README.md's index: every path and name is where it says"
exit $status
