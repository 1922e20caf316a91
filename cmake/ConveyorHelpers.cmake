# conveyor_library(NAME folder DEPS ...): one static library from every .cpp in a folder (globbed,
# so adding a file needs no edit here). Headers are included as "folder/file.hpp".
function(conveyor_library name)
  cmake_parse_arguments(ARG "" "" "DEPS;PRIVATE_DEPS;EXCLUDE" ${ARGN})
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
  else()
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE "${CONVEYOR_SOURCE_DIR}")
    target_link_libraries(${name} INTERFACE ${ARG_DEPS})
  endif()
endfunction()

# conveyor_test_suite(NAME [SEPARATE_SOURCES] DEPS ...): one GoogleTest program from
# tests/<folder>/*_test.cpp, each test registered with ctest (gtest_discover_tests).
# SEPARATE_SOURCES keeps the suite out of unity builds (CMAKE_UNITY_BUILD, the sanitizer trees):
# its files define helpers of the same name, each in its own anonymous namespace.
function(conveyor_test_suite name)
  cmake_parse_arguments(ARG "SEPARATE_SOURCES" "" "DEPS" ${ARGN})
  file(GLOB _sources CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/*.cpp")
  if(NOT _sources)
    return()
  endif()
  add_executable(${name} ${_sources})
  if(ARG_SEPARATE_SOURCES)
    set_target_properties(${name} PROPERTIES UNITY_BUILD OFF)
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
