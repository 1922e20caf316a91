# cmake -DLIBRARY=FILE -DDEST=FOLDER -P store_in_cache.cmake: copies a built library into a
# cache folder of ~/.cache/conveyor under a temporary name, renames it into place (so no reader
# ever sees half of it), then writes its sha256 beside it: the stamp that ConveyorXgrammar.cmake
# checks before linking it.
get_filename_component(_name "${LIBRARY}" NAME)
file(MAKE_DIRECTORY "${DEST}")
string(RANDOM LENGTH 12 _tag)
file(COPY_FILE "${LIBRARY}" "${DEST}/${_name}.${_tag}.part")
file(RENAME "${DEST}/${_name}.${_tag}.part" "${DEST}/${_name}")
file(SHA256 "${DEST}/${_name}" _sha)
file(WRITE "${DEST}/${_name}.sha256.${_tag}.part" "${_sha}\n")
file(RENAME "${DEST}/${_name}.sha256.${_tag}.part" "${DEST}/${_name}.sha256")
