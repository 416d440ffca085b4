# kiln_bench's usage errors around the options that choose the schedule (--knobs, --db,
# --auto-config; registered in bench/CMakeLists.txt), one CASE a run: kiln_bench must exit with
# status 2 and print each expected piece of its message on stderr.
#   cmake -DKILN_BENCH=<kiln_bench> -DWORK_DIR=<folder> -DCASE=<case> -P usage_errors.cmake
set(common --workload matmul --shape 64x64x64 --reps 1)
if(CASE STREQUAL "not_json")
    set(args ${common} --auto-config "{\"tile_x\": 64,")
    set(expected "bench_kiln_auto: --auto-config is not JSON ("
                 "); give the knob values as an object, e.g. '{\"tile_x\":64,...}'")
elseif(CASE STREQUAL "missing_file")
    set(missing "${WORK_DIR}/no_such_config.json")
    file(MAKE_DIRECTORY "${WORK_DIR}")
    file(REMOVE "${missing}")
    set(args ${common} --auto-config "@${missing}")
    set(expected "bench_kiln_auto: --auto-config: cannot read ${missing}")
elseif(CASE STREQUAL "not_a_point")
    set(args ${common} --auto-config "{\"no_such_knob\": 1}")
    set(expected "bench_kiln_auto: config: space 'auto:matmul' has no knob 'no_such_knob'; "
                 "its knobs are: ")
elseif(CASE STREQUAL "knobs_and_auto_config")
    set(args ${common} --knobs tile_x=64 --auto-config "{}")
    set(expected "bench_kiln: --knobs, --db and --auto-config each choose the schedule; give one")
elseif(CASE STREQUAL "empty_auto_config")
    set(args ${common})
    set(empty_flag --auto-config)
    set(expected "bench_kiln: --auto-config needs a value (JSON or @FILE), got an empty one")
elseif(CASE STREQUAL "empty_db")
    set(args ${common})
    set(empty_flag --db)
    set(expected "bench_kiln: --db needs a value (a tuning database), got an empty one")
elseif(CASE STREQUAL "empty_knobs")
    set(args ${common})
    set(empty_flag --knobs)
    set(expected "bench_kiln: --knobs needs a value (knob=value,...), got an empty one")
else()
    message(FATAL_ERROR "unknown CASE '${CASE}'")
endif()

# An empty value is a quoted "" on the command line (a list drops empty elements).
if(DEFINED empty_flag)
    execute_process(COMMAND "${KILN_BENCH}" ${args} ${empty_flag} "" RESULT_VARIABLE rc
                    OUTPUT_VARIABLE out ERROR_VARIABLE err)
    list(APPEND args ${empty_flag} "''")
else()
    execute_process(COMMAND "${KILN_BENCH}" ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                    ERROR_VARIABLE err)
endif()
string(JOIN " " command kiln_bench ${args})
if(NOT rc STREQUAL "2")
    message(FATAL_ERROR "${command}: exit status ${rc}, expected 2\n"
                        "stdout: ${out}\nstderr: ${err}")
endif()
foreach(piece IN LISTS expected)
    string(FIND "${err}" "${piece}" at)
    if(at EQUAL -1)
        message(FATAL_ERROR "${command}: stderr does not contain '${piece}'\n"
                            "stderr: ${err}")
    endif()
endforeach()
