# Unity builds (the sanitizer trees, scripts/sanitize.sh): a target's files are compiled
# CONVEYOR_UNITY_BATCH at a time, each batch one file that includes them, so that the templates
# every file instantiates (CAF, Beast, nlohmann/json, GoogleTest) are compiled, optimized and
# instrumented once per batch instead of once per file. The batch includes each file by its path
# in the checkout ("server/http_server.cpp", found through the checkout's include folder), never
# by an absolute path, so that no path of the checkout reaches the objects (ccache gives the
# compiler that folder as a relative one) and ccache finds the objects again from another clone.
# CMake's own unity builds include absolute paths. The CPU build (build/) compiles every file
# alone, so that a file missing an include still fails there.
option(CONVEYOR_UNITY "Compile each target's files in batches (unity builds)" OFF)
set(CONVEYOR_UNITY_BATCH 16 CACHE STRING "Files per batch of a unity build")

# conveyor_unity(TARGET): with CONVEYOR_UNITY, TARGET's .cpp files in the checkout are compiled in
# batches instead of one by one (the files stay in the target, as headers).
function(conveyor_unity target)
  if(NOT CONVEYOR_UNITY)
    return()
  endif()
  get_target_property(_sources ${target} SOURCES)
  get_target_property(_dir ${target} SOURCE_DIR)
  set(_files "")
  foreach(_s IN LISTS _sources)
    get_filename_component(_abs "${_s}" ABSOLUTE BASE_DIR "${_dir}")
    file(RELATIVE_PATH _rel "${CONVEYOR_SOURCE_DIR}" "${_abs}")
    if(_abs MATCHES "\\.(cpp|cc)$" AND NOT _rel MATCHES "^\\.\\.")
      list(APPEND _files "${_rel}")
    endif()
  endforeach()
  list(LENGTH _files _count)
  if(_count LESS 2)
    return()
  endif()
  foreach(_first RANGE 0 "${_count}" "${CONVEYOR_UNITY_BATCH}")
    if(_first EQUAL _count)
      break()
    endif()
    list(SUBLIST _files ${_first} ${CONVEYOR_UNITY_BATCH} _batch)
    set(_text "")
    foreach(_rel IN LISTS _batch)
      string(APPEND _text "#include \"${_rel}\"\n")
      set_source_files_properties("${CONVEYOR_SOURCE_DIR}/${_rel}" PROPERTIES HEADER_FILE_ONLY ON)
    endforeach()
    math(EXPR _index "${_first} / ${CONVEYOR_UNITY_BATCH}")
    set(_unity "${CMAKE_CURRENT_BINARY_DIR}/unity/${target}_${_index}.cpp")
    file(CONFIGURE OUTPUT "${_unity}" CONTENT "${_text}" @ONLY)
    target_sources(${target} PRIVATE "${_unity}")
  endforeach()
  target_include_directories(${target} PRIVATE "${CONVEYOR_SOURCE_DIR}")
endfunction()

# conveyor_library(NAME [SEPARATE_SOURCES] DEPS ...): one static library from every .cpp in a
# folder (globbed, so adding a file needs no edit here). Headers are included as
# "folder/file.hpp". SEPARATE_SOURCES keeps its files out of unity builds.
function(conveyor_library name)
  cmake_parse_arguments(ARG "SEPARATE_SOURCES" "" "DEPS;PRIVATE_DEPS;EXCLUDE" ${ARGN})
  file(GLOB _sources CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/*.cpp"
       "${CMAKE_CURRENT_SOURCE_DIR}/*/*.cpp")
  foreach(_ex IN LISTS ARG_EXCLUDE)
    list(FILTER _sources EXCLUDE REGEX "${_ex}")
  endforeach()
  if(_sources)
    add_library(${name} STATIC ${_sources})
    target_include_directories(${name} PUBLIC "${CONVEYOR_SOURCE_DIR}")
    target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
    target_compile_options(${name} PRIVATE ${CONVEYOR_WARNINGS})
    if(NOT ARG_SEPARATE_SOURCES)
      conveyor_unity(${name})
    endif()
  else()
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE "${CONVEYOR_SOURCE_DIR}")
    target_link_libraries(${name} INTERFACE ${ARG_DEPS})
  endif()
endfunction()

# conveyor_test_suite(NAME [SEPARATE_SOURCES] DEPS ...): one GoogleTest program from
# tests/<folder>/*_test.cpp, each test registered with ctest (gtest_discover_tests).
# SEPARATE_SOURCES keeps the suite out of unity builds (CONVEYOR_UNITY, the sanitizer trees): its
# files define helpers of the same name, each in its own anonymous namespace.
function(conveyor_test_suite name)
  cmake_parse_arguments(ARG "SEPARATE_SOURCES" "" "DEPS" ${ARGN})
  file(GLOB _sources CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/*.cpp")
  if(NOT _sources)
    return()
  endif()
  add_executable(${name} ${_sources})
  if(NOT ARG_SEPARATE_SOURCES)
    conveyor_unity(${name})
  endif()
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  target_compile_options(${name} PRIVATE ${CONVEYOR_WARNINGS})
  target_compile_definitions(${name} PRIVATE
    CONVEYOR_SOURCE_DIR="${CONVEYOR_SOURCE_DIR}"
    CONVEYOR_BINARY_DIR="${CMAKE_BINARY_DIR}")
  include(GoogleTest)
  gtest_discover_tests(${name} WORKING_DIRECTORY "${CONVEYOR_SOURCE_DIR}"
                       DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300 LABELS ${name})
endfunction()
