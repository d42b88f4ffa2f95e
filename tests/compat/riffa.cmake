# The riffa-rules driver (riffa.c: upstream's riffa driver's rules, enforced)
# and riffa_host, oni-repl's traffic through <oni.h> against it. Included
# from tests/compat/CMakeLists.txt.
add_library(onidriver_riffarules SHARED ${CMAKE_CURRENT_SOURCE_DIR}/riffa.c)
set_target_properties(onidriver_riffarules PROPERTIES C_STANDARD 99 C_EXTENSIONS OFF
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
target_include_directories(onidriver_riffarules PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_compile_options(onidriver_riffarules PRIVATE -pedantic -Wall -Wextra -Werror)
target_link_libraries(onidriver_riffarules PRIVATE Threads::Threads)
add_executable(riffa_host ${CMAKE_CURRENT_SOURCE_DIR}/riffa_host.c)
set_target_properties(riffa_host PROPERTIES C_STANDARD 99 C_EXTENSIONS OFF)
target_include_directories(riffa_host PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_compile_options(riffa_host PRIVATE -pedantic -Wall -Wextra -Werror)
target_link_libraries(riffa_host PRIVATE oni Threads::Threads)
add_dependencies(riffa_host onidriver_riffarules)
add_test(NAME compat_riffa_rules COMMAND riffa_host riffarules 20000)
set_tests_properties(compat_riffa_rules PROPERTIES TIMEOUT 120
  ENVIRONMENT "ONI_DRIVER_PATH=${CMAKE_BINARY_DIR}")
