//! Plot scripts run with the project's Python (matplotlib); embedded so they work from anywhere.

/// argv: ratings JSON (list of {player, elo, margin, step}), output PNG.
pub const RATINGS_PLOT: &str = r#"
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
points = json.load(open(sys.argv[1]))
models = sorted((p for p in points if p["step"] is not None), key=lambda p: p["step"])
fig, ax = plt.subplots(figsize=(7, 4))
if models:
    ax.errorbar([p["step"] for p in models], [p["elo"] for p in models], yerr=[p["margin"] for p in models], marker="o", capsize=3, label="checkpoints")
for p in points:
    if p["step"] is None:
        ax.axhline(p["elo"], linestyle="--", linewidth=1, color="gray")
        ax.annotate(p["player"], (0, p["elo"]), textcoords="offset points", xytext=(4, 3), fontsize=8, color="gray", xycoords=("axes fraction", "data"))
ax.set_xlabel("training step")
ax.set_ylabel("Elo")
ax.set_title("Elo by training step (95% CI)")
ax.grid(alpha=0.3)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=120)
"#;
