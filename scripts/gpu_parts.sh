# Sourced on the GPU machine: puts back together the wheels `scripts/prepare_gpu_run.sh` cut into
# parts (carry_in_parts there), because one run may carry 64 MiB. Each earlier run copies its
# folder's parts with `copy_parts .TAGNN`; the run that carries the last folder (the one with
# SHA256 and PARTS) calls `install_parts .TAGNN TARGET`, which checks every part arrived, joins and
# checks each wheel, and installs them (with the small wheels in that folder's whl/) into TARGET.
# Returns non-zero, and says why, when a part is missing (the machine went back between runs).

parts_tag() { basename "$1" | sed 's/^\.//; s/[0-9]*$//'; }

copy_parts() {
  local dir=$1 tag
  tag=$(parts_tag "$dir")
  mkdir -p "/tmp/parts/$tag" || return 1
  # The last folder holds no part (scripts/prepare_gpu_run.sh): nothing to copy from it.
  if compgen -G "$dir/*.part.*" > /dev/null; then cp "$dir"/*.part.* "/tmp/parts/$tag/"; fi
}

install_parts() {
  local dir=$1 target=$2 tag have want name
  tag=$(parts_tag "$dir")
  copy_parts "$dir" || return 1
  have=$(ls "/tmp/parts/$tag" | wc -l) want=$(cat "$dir/PARTS")
  if [ "$have" != "$want" ]; then
    echo "$tag: $have of $want parts in /tmp/parts/$tag: the machine went back between runs; start again from run 1"
    return 1
  fi
  [ -f "$target/.installed-$tag" ] && return 0
  while read -r _ name; do
    cat "/tmp/parts/$tag/$name".part.* > "/tmp/$name"
  done < "$dir/SHA256"
  (cd /tmp && sha256sum -c "$OLDPWD/$dir/SHA256") || return 1
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$target" \
    $(awk '{print "/tmp/" $2}' "$dir/SHA256") $(ls "$dir"/whl/*.whl 2>/dev/null) || return 1
  while read -r _ name; do rm -f "/tmp/$name"; done < "$dir/SHA256"
  mkdir -p "$target" && touch "$target/.installed-$tag"
}
