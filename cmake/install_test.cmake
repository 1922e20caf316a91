# ctest: `cmake --install` into a fresh prefix, move the prefix, and run the installed
# `conveyor generate` from a folder outside the source and build trees. Passes only when the
# installed files are where a packaged program keeps them, the program's output equals
# EXPECTED_FILE byte for byte, and neither the program nor the shim holds a path of the source
# or build tree.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DEXPECTED_FILE=... -P install_test.cmake
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR EXPECTED_FILE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "install_test.cmake: -D${var}=... is required")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}/elsewhere")
set(prefix "${WORK_DIR}/prefix")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}"
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${status}):\n${out}\n${err}")
endif()

# A prefix works wherever it is: move it before running anything.
set(moved "${WORK_DIR}/moved")
file(RENAME "${prefix}" "${moved}")
set(installed
  bin/conveyor
  lib/conveyor/libconveyor_sentencepiece.so
  share/conveyor/conveyor.toml
  share/conveyor/models/stories260K/stories260K.bin
  share/conveyor/models/stories260K/tok512.model
  share/conveyor/models/stories260K/chat_template.jinja)
foreach(f IN LISTS installed)
  if(NOT EXISTS "${moved}/${f}")
    message(FATAL_ERROR "not installed: PREFIX/${f}")
  endif()
endforeach()

# No path of the trees the program was built from.
foreach(f bin/conveyor lib/conveyor/libconveyor_sentencepiece.so)
  foreach(tree "${SOURCE_DIR}" "${BUILD_DIR}")
    string(REGEX REPLACE "([][+.*()^$?|\\])" "\\\\\\1" pattern "${tree}")
    file(STRINGS "${moved}/${f}" hits REGEX "${pattern}")
    if(hits)
      message(FATAL_ERROR "PREFIX/${f} holds a path of ${tree}: ${hits}")
    endif()
  endforeach()
endforeach()

# From another folder, without the shim override, the default model and tokenizer.
execute_process(
  COMMAND "${CMAKE_COMMAND}" -E env --unset=CONVEYOR_SPM_SHIM
          "${moved}/bin/conveyor" generate --prompt "Once upon a time" --max-tokens 60
          --temperature 0
  WORKING_DIRECTORY "${WORK_DIR}/elsewhere"
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "the installed conveyor generate failed (${status}):\n${out}\n${err}")
endif()
file(READ "${EXPECTED_FILE}" expected)
if(NOT out STREQUAL expected)
  message(FATAL_ERROR "the installed conveyor generate printed\n[${out}]\ninstead of\n[${expected}]\n${err}")
endif()

# The installed default configuration loads and names the default model.
execute_process(
  COMMAND "${moved}/bin/conveyor" config --config "${moved}/share/conveyor/conveyor.toml" --print
  WORKING_DIRECTORY "${WORK_DIR}/elsewhere"
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0 OR NOT out MATCHES "path = \"models/stories260K/stories260K.bin\"")
  message(FATAL_ERROR "the installed configuration does not load (${status}):\n${out}\n${err}")
endif()
message("installed into a prefix, moved it, ran its conveyor from another folder: as expected")
file(REMOVE_RECURSE "${WORK_DIR}")
