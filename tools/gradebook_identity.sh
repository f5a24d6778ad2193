#!/usr/bin/env bash
# A restructuring of the grader must not change a grade. This grades the same submissions (every
# kernel lab's master, untouched lab and tests/fixtures, as they were at OLD) in the simulator with
# the grader at OLD and at NEW, same seed, and diffs the gradebooks (labs 1-5; lab 6 is newer).
# Record of issue 29's run: records/grader/identity/README.md. Needs the repo's .venv (make venv).
# Usage: bash tools/gradebook_identity.sh OLD NEW   (commits; work folder /tmp/gbid, its
# worktrees removed by the next run or `git worktree prune`)
set -uo pipefail
OLD=$1; NEW=$2; W=/tmp/gbid; rm -rf $W; mkdir -p $W/subs
cd "$(dirname "$0")/.."; REPO=$PWD
for c in $OLD $NEW; do git worktree remove --force $W/$c 2>/dev/null; git worktree add -q --detach $W/$c $c; done
# the submissions: OLD's files, the same bytes for both graders
git archive $OLD solutions labs tests/fixtures | tar -x -C $W/subs
declare -A SUBS
for n in 1 2 3 4 5; do
  lab=$(ls $W/subs/solutions | grep "^lab$n" | sed 's/.ipynb//')
  SUBS[$n]="$W/subs/solutions/$lab.ipynb $W/subs/labs/$lab.ipynb $(ls $W/subs/tests/fixtures/*/lab${n}_*.py 2>/dev/null | tr '\n' ' ')"
done
SUBS[2]+=" $(ls $W/subs/tests/fixtures/{submissions,threats,neighbours,container}/*.py $W/subs/tests/fixtures/submissions/*.ipynb 2>/dev/null | tr '\n' ' ')"
SUBS[5]+=" $(ls $W/subs/tests/fixtures/lab5/*.py | tr '\n' ' ')"
for c in $OLD $NEW; do
  for n in 1 2 3 4 5; do
    echo "== $c lab$n: $(echo ${SUBS[$n]} | wc -w) submissions $(date +%T)"
    (cd $W/$c && AUTOGRADER_SEED=12345 timeout 3000 $REPO/.venv/bin/python -m autograder grade lab$n ${SUBS[$n]} \
       --out $W/out-$c/lab$n --simulator --workers 2 --quiet > $W/out-$c-lab$n.log 2>&1; echo "rc=$?")
  done
done
for n in 1 2 3 4 5; do
  echo "== lab$n: $(( $(wc -l < $W/out-$NEW/lab$n/grades.csv) - 1 )) submissions"; diff <(cut -d, -f1-9 $W/out-$OLD/lab$n/grades.csv) <(cut -d, -f1-9 $W/out-$NEW/lab$n/grades.csv) && echo identical
done
