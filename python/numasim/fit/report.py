"""What ``numasim fit`` prints: the best setting, each parameter with its interval and profile,
every discrete combination's best objective, the residuals and the fit's cost."""

from __future__ import annotations

import math

from numasim.fit.search import NOISE_MULTIPLE, FitResult


def _g(x: float) -> str:
    return f"{x:.4g}"


def text(exp, r: FitResult) -> str:
    b = r.best
    rms = math.sqrt(b.objective)
    lines = [
        f"{exp.name}: fit to {exp.reference.source}",
        "INFERRED — a setting fitted to this table, not a source; do not report agreement "
        "with the table it was fitted on.",
        "",
        f"best setting: {b.setting.label()}",
        f"objective J = {b.objective:.3g} (rms log-ratio {rms:.3f}, about {rms * 100:.1f} % "
        f"per published number); noise of J (jackknife over {r.replications} replications): "
        f"{r.noise:.2g}",
        "",
    ]
    if r.parameters:
        lines.append(f"continuous parameters (interval: J ≤ J* + {NOISE_MULTIPLE:g} × noise "
                     "along the profile, others at the optimum):")  # fmt: skip
        for p in r.parameters:
            lo = ("≤ " if p.open_low else "") + _g(p.low)
            hi = _g(p.high) + (" (range end)" if p.open_high else "")
            lines.append(f"  {p.name} = {_g(p.value)}   interval {lo} … {hi}")
            lines.append("    profile: " + ", ".join(f"{_g(v)}: {j:.3g}" for v, j in p.profile))
        lines.append("")
    lines.append(
        "discrete combinations (each with its continuous parameters fitted; ≈: J within "
        f"{NOISE_MULTIPLE:g} × noise of the best, which the table cannot tell apart):"
    )
    limit = b.objective + NOISE_MULTIPLE * r.noise
    for c in sorted(r.combos, key=lambda c: c.objective):
        mark = "≈" if c.objective <= limit else " "
        lines.append(f"  {mark} J = {c.objective:.3g}   {c.setting.label()}")
    lines += ["", "residuals (numasim under the best setting vs published):"]
    for row in r.residuals:
        if "workload" in row:
            lines.append(f"  {row['workload']} n={row['n']:<4} {row['column']:<8} published "
                         f"{row['published']:>8g} numasim {row['numasim']:>9.1f} "
                         f"({row['residual_pct']:+.1f} %)")  # fmt: skip
        else:
            lines.append(f"  {row['what']}: published {row['published']:g}, numasim "
                         f"{row['numasim']:.2f} ({row['difference_pp']:+.2f} pp)")  # fmt: skip
    lines += ["", f"cost: {r.evaluations} settings simulated, {r.runs} runs, "
              f"{r.seconds:.0f} s"]  # fmt: skip
    return "\n".join(lines)
