# The code the shell test drivers share (tests/*/*.sh), as sp_test.py is the Python drivers': source it with
#   . "$(dirname "$0")/../support/sp_test.sh"
# Not a test framework: each driver keeps its cases and its expectations; its exit status is the verdict.

# Ends the driver now: prints FAIL with the reason and exits 1.
fail() { echo "FAIL: $*"; exit 1; }
