# Where `cmake --install build --prefix PREFIX` puts Conveyor, and the build tree's mirror of that
# layout. Programs find their files at run time from their own location (common/install_dirs.hpp):
# the nearest ancestor folder of the executable that holds share/conveyor is the prefix. No path
# of the source or build tree is compiled into a program.
#
#   PREFIX/bin/conveyor                                    the program
#   PREFIX/lib/conveyor/libconveyor_sentencepiece.so       the SentencePiece shim (model/CMakeLists.txt)
#   PREFIX/share/conveyor/conveyor.toml                    the default configuration
#   PREFIX/share/conveyor/models/stories260K/...           the default model and its tokenizer
#
# These folders are fixed relative to the prefix because the programs look for them there.
set(CONVEYOR_INSTALL_BINDIR "bin")
set(CONVEYOR_INSTALL_PRIVATE_LIBDIR "lib/conveyor")
set(CONVEYOR_INSTALL_DATADIR "share/conveyor")

# The build folder is the prefix of the programs built in it (build/apps/conveyor,
# build/tests/SUITE/..., build/benchmarks/...): it holds share/conveyor and lib/conveyor too.
set(CONVEYOR_BUILD_PREFIX "${CMAKE_BINARY_DIR}")

# An installed program keeps the link folders of libraries outside the system ones (a libtorch
# from pip, say) in its RPATH; build-tree RPATHs are dropped at install as usual.
set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)

# The data files: the default model (with its license and description) and configuration.
set(CONVEYOR_DATA_FILES
  conveyor.toml=config/conveyor.toml
  models/stories260K/stories260K.bin=models/stories260K/stories260K.bin
  models/stories260K/tok512.model=models/stories260K/tok512.model
  models/stories260K/tok512.bin=models/stories260K/tok512.bin
  models/stories260K/chat_template.jinja=models/stories260K/chat_template.jinja
  models/stories260K/LICENSE=models/stories260K/LICENSE
  models/stories260K/README.md=models/stories260K/README.md)
foreach(_entry IN LISTS CONVEYOR_DATA_FILES)
  string(REPLACE "=" ";" _pair "${_entry}")
  list(GET _pair 0 _to)
  list(GET _pair 1 _from)
  # Copied (not linked) so that a moved build folder keeps working; configure_file copies again
  # when the source changes.
  configure_file("${CMAKE_CURRENT_SOURCE_DIR}/${_from}"
                 "${CONVEYOR_BUILD_PREFIX}/${CONVEYOR_INSTALL_DATADIR}/${_to}" COPYONLY)
  get_filename_component(_dir "${CONVEYOR_INSTALL_DATADIR}/${_to}" DIRECTORY)
  install(FILES "${CMAKE_CURRENT_SOURCE_DIR}/${_from}" DESTINATION "${_dir}")
endforeach()
