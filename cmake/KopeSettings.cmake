# Warnings and shared flags live in INTERFACE targets so every target opts in explicitly.
add_library(kope_warnings INTERFACE)
target_compile_options(kope_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
  -Wunused -Woverloaded-virtual -Wdouble-promotion -Wformat=2
  -Wimplicit-fallthrough)

# kope_add_test(<name> LABEL <label> SOURCES <files...>): one GoogleTest binary, its cases
# registered with CTest under the given label (unit, integration, perf, gpu).
function(kope_add_test name)
  cmake_parse_arguments(ARG "" "LABEL;TIMEOUT" "SOURCES;LIBS" ${ARGN})
  if(NOT ARG_LABEL)
    set(ARG_LABEL unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE kope_lib kope_test_support kope_warnings GTest::gtest GTest::gtest_main
                        ${ARG_LIBS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_definitions(${name} PRIVATE
    KOPE_SOURCE_DIR="${PROJECT_SOURCE_DIR}" KOPE_BINARY_DIR="${PROJECT_BINARY_DIR}")
  gtest_discover_tests(${name} PROPERTIES LABELS ${ARG_LABEL} TIMEOUT ${ARG_TIMEOUT}
                       DISCOVERY_TIMEOUT 60)
endfunction()
