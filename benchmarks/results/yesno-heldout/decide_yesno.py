import sys, json, warnings
warnings.filterwarnings("ignore")
from pathlib import Path
from conli.evaluation.detection import Outcome, read_predictions
from conli.evaluation import one_token as ot
from conli.training.data import read_rows
from conli.signals.model import FUSED_ARTIFACT, load_model
run = Path(sys.argv[1])
outs = list(read_predictions(run / "predictions.jsonl", Outcome.from_json))
_, rows = read_rows(Path("/work/main/eval/features/dev.jsonl"))
report = ot.decide_one_token(outs, rows, load_model(FUSED_ARTIFACT), detector="yesno")
text = ot.markdown(report, "fused.v1 + rule")
Path(run / "decision.md").write_text(text)
json.dump({**report, "decisions": {k: v.as_dict() for k, v in report["decisions"].items()}}, open(run / "decision.json", "w"), indent=1)
print(text)
