#!/bin/sh
# expect_output.py judges both the exit status and the output: each case below must come out as stated.
# Usage: expect_output_test.sh PYTHON EXPECT_OUTPUT_PY
py=$1 expect=$2
fails=0
judge() { # want_status description args...
    want=$1 what=$2
    shift 2
    "$py" "$expect" "$@" >/dev/null 2>&1
    got=$?
    if [ "$got" != "$want" ]; then
        echo "expect_output_test: $what: exit $got, want $want"
        fails=1
    fi
}
judge 0 "expected line, status 0" --pass "3 passed" -- sh -c 'echo "3 passed"'
judge 1 "expected line but status 1 (a PASS_REGULAR_EXPRESSION alone passes this)" --pass "3 passed" -- sh -c 'echo "3 passed"; exit 1'
judge 1 "status 0 without the line" --pass "3 passed" -- sh -c 'echo "nothing"'
judge 1 "a --fail pattern" --pass "passed" --fail "[0-9]+ (failed|error)" -- sh -c 'echo "2 passed, 1 error"'
judge 0 "patterns span lines" --pass "a\nb" -- sh -c 'printf "a\nb\n"'
judge 77 "the skip status passes through" --skip-rc 77 --pass "x" -- sh -c 'exit 77'
judge 0 "an expected failure" --rc-nonzero --pass "differs" -- sh -c 'echo differs; exit 1'
judge 1 "an expected failure that succeeded" --rc-nonzero --pass "differs" -- sh -c 'echo differs'
judge 1 "a pytest run with a missing module" --pass "[0-9]+ passed" --fail "[0-9]+ (failed|error)" -- "$py" -m pytest -q -p no:cacheprovider /nonexistent/dir
[ $fails = 0 ] && echo "expect_output_test: all cases judged as stated"
exit $fails
