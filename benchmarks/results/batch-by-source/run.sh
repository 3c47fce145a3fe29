#!/bin/bash
# issue 56.3: conli batch over interleaved sources, before (6b4f3fe) and after (46b91dd) grouping
cd /work/wt/batch56
for arm in before:frz56b after:frz56c; do
  name=${arm%%:*}; tree=/work/wt/${arm##*:}
  rm -f out-$name.jsonl
  start=$(date +%s.%N)
  PYTHONPATH=$tree/src nice -n -5 /work/main/.venv/bin/python -m conli.cli batch in.jsonl out-$name.jsonl \
    --mode check --llm local --no-progress > log-$name.txt 2>&1
  rc=$?; end=$(date +%s.%N)
  echo "$name rc=$rc wall=$(echo "$end - $start" | bc)" >> times.txt
done
