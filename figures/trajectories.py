"""Example RLHF jobs: proxy reward, loss, gold, observed evaluations, EvalStop's stop and
the delivered checkpoint (from the trajectory extract)."""
import polars as pl
from matplotlib.lines import Line2D

from fastsim.figures import _style as S

NEEDS = ("extracts",)
# the extracts this script reads and their columns it uses (checked by `fastsim figures`)
READS = {"trajectory_jobs.parquet": ("role", "n_evals", "stopped", "trigger_eval",
                                     "delivered_eval", "peak_eval", "hacking", "ustar",
                                     "sigma", "policy"),
         "trajectory_points.parquet": ("role", "kind", "u", "proxy", "gold", "score", "loss")}


@S.themed
def draw(sources, out, formats):
    jobs = S.sweep_table(sources["extracts"] / "trajectory_jobs.parquet")
    pts = S.sweep_table(sources["extracts"] / "trajectory_points.parquet")
    n = jobs.height
    fig, axes = S.subplots(1, n, figsize=(3.6 * n, 3.4), squeeze=False)
    c = S.sns.color_palette("colorblind", 5)
    for ax, job in zip(axes[0], jobs.iter_rows(named=True)):
        role, E = job["role"], job["n_evals"]
        curve = pts.filter((pl.col("role") == role) & (pl.col("kind") == "curve"))
        ev = pts.filter((pl.col("role") == role) & (pl.col("kind") == "eval"))
        ax.plot(curve["u"], curve["proxy"], color=c[1], label="proxy reward")
        ax.plot(curve["u"], curve["gold"], color=c[2], label="gold (hidden)")
        ax.plot(ev["u"], ev["score"], "o", ms=4, color=c[0], label="observed eval")
        ax2 = ax.twinx()
        ax2.plot(curve["u"], curve["loss"], color=c[4], ls="--", label="loss")
        ax2.grid(False)
        ax2.set_ylabel("training loss", color=c[4])
        if job["stopped"]:
            ax.axvline(job["trigger_eval"] / E, color="k", lw=1.2, label="stop (trigger)")
        ax.axvline(job["delivered_eval"] / E, color="k", ls=":", lw=1.2,
                   label="delivered checkpoint")
        ax.axvline(job["peak_eval"] / E, color=c[2], ls=":", lw=1, label="gold peak eval")
        kind = "hacking" if job["hacking"] else "healthy"
        # a trigger at the last evaluation is the job's completion: it frees no GPU
        late = ", at completion" if job["stopped"] and job["trigger_eval"] == E else ""
        ax.set_title(f"{role} ({kind}, u*={job['ustar']:.2f}{late})", fontsize=9)
        ax.set_xlabel("progress u")
    axes[0][0].set_ylabel("score")
    h1, l1 = axes[0][0].get_legend_handles_labels()
    fig.legend(h1 + [Line2D([], [], color=c[4], ls="--")], l1 + ["loss"], loc="lower center",
               ncol=7, fontsize=8, bbox_to_anchor=(0.5, -0.08))
    sig, spec = jobs["sigma"][0], jobs["policy"][0]  # spec: the table label, evalstop(k=2)
    policy = S.policy_label(spec.split("(")[0].strip(), jobs.select("policy"))
    # the one figure without intervals: it shows single jobs, and says so (headline.png
    # has the rates, with their intervals and n)
    fig.suptitle(f"{policy} under SRTF-Est, evaluation noise σ = {sig:g}: one simulated job "
                 f"per panel, an example of each outcome, not an estimate (no interval)",
                 fontsize=10)
    fig.tight_layout()
    return S.save(fig, out, "trajectories", formats)


if __name__ == "__main__":
    S.main(draw, NEEDS)
