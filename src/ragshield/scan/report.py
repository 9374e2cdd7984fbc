"""The self-contained HTML report of ``ragshield scan``.

Example::

    from ragshield.scan.report import render_report
    Path("report.html").write_text(render_report(scan))

Why hand-written SVG: the report must open anywhere, offline, forever — one file with
inline CSS and an inline SVG chart, no JavaScript, no fonts or images to fetch. Every
string from the index or the questions is escaped, since a scanned index holds
attacker-controlled text by design.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from html import escape
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragshield.eval.real_retrieval import QuestionTrace
    from ragshield.scan.gate import Cell
    from ragshield.scan.run import ScanResult

_TEXT_CHARS = 600

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;
max-width:1180px;color:#1d2330;background:#fff;line-height:1.45;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{margin-top:2.2rem;border-bottom:2px solid #e3e6ee;
padding-bottom:.2rem}h3{margin:1.4rem 0 .4rem}
table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.9rem}
th,td{border:1px solid #d5d9e3;padding:.3rem .6rem;text-align:left;vertical-align:top}
th{background:#f1f3f8}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.rec td{background:#eef8ef;font-weight:600}
.box{border:2px solid #2e7d32;background:#f3faf3;border-radius:8px;padding:.8rem 1.1rem}
.muted{color:#5f6b7a;font-size:.88rem}
.bad{color:#b3261e;font-weight:600}.good{color:#2e7d32;font-weight:600}
.tag{display:inline-block;border-radius:4px;padding:0 .35rem;font-size:.78rem;color:#fff}
.tag.adv{background:#b3261e}.tag.ok{background:#2e7d32}.tag.rm{background:#6b7280}
.example{border:1px solid #d5d9e3;border-radius:8px;padding:.6rem 1rem;margin:1rem 0}
.passage{font-size:.85rem;white-space:pre-wrap;word-break:break-word;max-width:640px}
"""
# Colour-blind-safe palette (Okabe-Ito).
_COLOURS = ("#999999", "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00")
_ATTACK_COLS = (
    ("attack_reaches", "attack reaches context"),
    ("adv_retrieved", "planted in top-k"),
    ("caught", "caught"),
    ("answer_kept", "answer kept"),
    ("benign_removed", "benign removed"),
    ("filter_ms", "filter ms/q"),
)
_CLEAN_COLS = (
    ("answer_kept", "answer kept"),
    ("gold_kept", "gold kept"),
    ("benign_removed", "benign removed"),
    ("touched", "questions touched"),
    ("filter_ms", "filter ms/q"),
)


def example_of(t: QuestionTrace, context_k: int) -> dict[str, Any]:
    """A compact, JSON-able audit of one question: every retrieved passage, whether it was
    planted, kept, in the generator's context, and each stage's reasons."""
    from ragshield.pipeline import select_context

    res = t.result
    kept = [] if res is None else list(res.kept)
    kept_ids = {r.id for r in (t.retrieved if res is None else kept)}
    reasons: dict[str, list[str]] = {}
    stages = [] if res is None else list(res.details.get("stages", [res]))
    for st in stages:
        for d in st.decisions:
            unit = "" if d.unit == "passage" else f" ({d.unit})"
            reasons.setdefault(d.passage_id, []).append(f"{st.name}{unit}: {d.reason}")
    kept_text = {r.id: r.text for r in kept}
    survivors = list(t.retrieved) if res is None else kept
    context = {r.id for r in select_context(survivors, context_k)}  # the pipeline's rule
    passages = []
    for r in t.retrieved:
        p = t.planted.get(r.id)
        passages.append(
            {
                "id": r.id, "score": round(r.score, 4), "planted": p is not None,
                "attack": p.attack if p else "", "for_question": p.question_id if p else "", "source": p.source if p else "",
                "text": r.text[:_TEXT_CHARS], "kept": r.id in kept_ids,
                "kept_text": kept_text.get(r.id, r.text)[:_TEXT_CHARS]
                if r.id in kept_ids else "",
                "reasons": reasons.get(r.id, []), "in_context": r.id in context,
            }
        )  # fmt: skip
    target = next((p.target for p in t.planted.values() if p.question_id == t.case.id), "")
    return {
        "setting": t.setting, "defense": t.defense, "question_id": t.case.id,
        "question": t.case.question, "answers": list(t.case.answers), "target": target,
        "reached": bool(t.scores["attack_reaches"]), "passages": passages,
    }  # fmt: skip


def _num(v: Any, key: str) -> str:
    if not isinstance(v, (int, float)) or v != v:
        return "–"
    return f"{v:.1f}" if key in ("filter_ms", "adv_retrieved") else f"{v:.3f}"


def _table(
    head: Sequence[str], rows: Sequence[Sequence[str]], rec_row: int = -1, numeric: bool = True
) -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = []
    for i, row in enumerate(rows):
        cls = ' class="rec"' if i == rec_row else ""
        tds = "".join(
            f'<td class="num">{c}</td>' if j and numeric else f"<td>{c}</td>"
            for j, c in enumerate(row)
        )
        body.append(f"<tr{cls}>{tds}</tr>")
    return f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def bar_chart(values: dict[str, dict[str, float]], title: str) -> str:
    """Grouped bars, one group per setting and one bar per defense, values in [0, 1]."""
    settings = list(values)
    defenses = list(dict.fromkeys(d for s in settings for d in values[s]))
    narrow = len(settings) * len(defenses) > 40  # many settings: thinner bars, still legible
    bw, gap, h, top, left = (10, 14, 240, 30, 90) if narrow else (22, 30, 240, 30, 46)
    group_w = bw * len(defenses) + gap
    width = left + group_w * max(len(settings), 1) + 10
    legend_h = 20 * len(defenses)
    label_h = 8 + 6 * max((len(s) for s in settings), default=0)  # labels slanted at 45°
    height = top + h + label_h + 30 + legend_h
    out = [  # scales down to the page's width (27 settings do not fit a screen at 1:1)
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="100%" '
        f'style="max-width:{width}px" viewBox="0 0 {width} {height}" '
        f'font-family="sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
        f'<text x="{left}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>',
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = top + h - tick * h
        out.append(
            f'<line x1="{left}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e6ee"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{tick:.2f}</text>'
        )
    for gi, s in enumerate(settings):
        x0 = left + gap / 2 + gi * group_w
        for di, d in enumerate(defenses):
            v = values[s].get(d, float("nan"))
            v = 0.0 if v != v else max(0.0, min(1.0, v))
            bh = v * h
            colour = _COLOURS[di % len(_COLOURS)]
            out.append(
                f'<rect x="{x0 + di * bw:.1f}" y="{top + h - bh:.1f}" width="{bw - 2}" '
                f'height="{max(bh, 0.8):.1f}" fill="{colour}">'
                f"<title>{escape(s)} / {escape(d)}: {v:.3f}</title></rect>"
            )
        cx = x0 + len(defenses) * bw / 2
        ly = top + h + 14
        out.append(
            f'<text x="{cx:.1f}" y="{ly}" text-anchor="end" '
            f'transform="rotate(-45 {cx:.1f} {ly})">{escape(s)}</text>'
        )
    out.append(
        f'<line x1="{left}" x2="{width - 10}" y1="{top + h}" y2="{top + h}" stroke="#1d2330"/>'
    )
    for di, d in enumerate(defenses):
        y = top + h + label_h + 20 + 20 * di
        out.append(
            f'<rect x="{left}" y="{y - 10}" width="12" height="12" '
            f'fill="{_COLOURS[di % len(_COLOURS)]}"/>'
            f'<text x="{left + 18}" y="{y}">{escape(d)}</text>'
        )
    out.append("</svg>")
    return "".join(out)


def _summary(scan: ScanResult) -> str:
    r = scan.results
    rows = [
        ("index", escape(scan.index)),
        ("store", escape(scan.store_kind) + " (scanned on an in-memory copy; not modified)"),
        ("passages", str(scan.n_passages)),
        ("questions", f"{len(scan.questions)} ({escape(scan.question_source)})"),
        ("encoder", escape(r.encoder)),
        ("retrieval", f"k={r.k}, context={r.context_k} nearest survivors"),
        ("split / seed", f"{escape(r.split)} / {r.seed}"),
        ("generator", escape(str(scan.notes.get("generator") or "none (filter-level metrics)"))),
    ]
    writer = scan.notes.get("attack_writer")
    counts = scan.notes.get("attack_texts") or {}
    made = ", ".join(f"{k} {int(v)}" for k, v in counts.items() if k != "seconds")
    rows.append(("attack texts", escape(f"written by {writer}: {made}") if writer else "templates"))
    gold_fb = int(scan.notes.get("gold_from_top1", 0))
    if gold_fb:
        rows.append(("gold passage", f"top-1 retrieved for {gold_fb} question(s) without answer"))
    times = ", ".join(f"{escape(k)} {v:.1f} s" for k, v in scan.timings.items())
    rows.append(("time per stage", times))
    return "<table>" + "".join(f"<tr><th>{a}</th><td>{b}</td></tr>" for a, b in rows) + "</table>"


def _setting_tables(scan: ScanResult) -> str:
    r = scan.results
    settings = list(dict.fromkeys(row.setting for row in r.rows))
    defenses = list(dict.fromkeys(row.defense for row in r.rows))
    has_gen = "asr" in r.rows[0].metrics
    parts = []
    for s in settings:
        cols = list(_CLEAN_COLS if s == "clean" else _ATTACK_COLS)
        if has_gen and s != "clean":
            cols[1:1] = [("asr", "ASR (end to end)"), ("accuracy", "accuracy")]
        elif has_gen:  # what a defense costs on normal traffic, answered for real
            cols[0:0] = [("accuracy", "accuracy (end to end)"), ("asr", "names target anyway")]
        r0 = r.get(defenses[0], s)
        planted = "" if s == "clean" else (
            f" — {r0.m_planted:.1f} planted passage(s) per question, texts: {escape(r0.sources)}"
        )  # fmt: skip
        rows = [
            [escape(d)] + [_num(r.get(d, s).metrics.get(key), key) for key, _ in cols]
            for d in defenses
        ]
        rec = defenses.index(scan.recommendation.chain)
        parts.append(f"<h3>{escape(s)}</h3><p class='muted'>n={r0.n}{planted}</p>")
        parts.append(_table(["defense", *[c for _, c in cols]], rows, rec))
    return "".join(parts)


def _group_table(scan: ScanResult, group: str, title: str, intro: str) -> str:
    """One table for a group of the settings table (:mod:`ragshield.attacks.settings`):
    a row per setting, per chain "attack reaches / adversarial majority"."""
    from ragshield.attacks.settings import group_of, known

    r = scan.results
    settings = [
        s for s in dict.fromkeys(row.setting for row in r.rows) if known(s) and group_of(s) == group
    ]
    if not settings:
        return ""
    defenses = list(dict.fromkeys(row.defense for row in r.rows))
    rows = []
    for s in settings:
        r0 = r.get(defenses[0], s)
        cells = [
            f"{_num(r.get(d, s).metrics.get('attack_reaches'), '')} / "
            f"{_num(r.get(d, s).metrics.get('adv_majority'), '')}"
            for d in defenses
        ]
        rows.append([f"{escape(s)}<br><span class='muted'>{r0.m_planted:.1f}/q, "
                     f"{escape(r0.sources)}</span>", *cells])  # fmt: skip
    calls = scan.results.notes.get("filter_aware_calls") or {}
    spent = "; ".join(f"{escape(k)}: {v:.1f}" for k, v in calls.items())
    note = f"<p class='muted'>filter-aware calls spent per target: {spent}</p>" if spent else ""
    return (
        f"<h2>{escape(title)}</h2><p class='muted'>{intro}</p>"
        + _table(["setting", *defenses], rows, numeric=False)
        + note
    )


def _adaptive(scan: ScanResult) -> str:
    return _group_table(
        scan,
        "adaptive",
        "Adaptive attacks (an attacker who has read the defense)",
        "Each cell: <b>attack reaches the context / adversarial majority of the context</b>. "
        "Rows: the question prefix rewritten (prefix-*), moved (question-*), left out "
        "(no-question), the wrong answer worded differently with edited genuine copies "
        "(answer-spread), each passage a different sentence of the gold page beside the "
        "wrong answer (facet-spread), the gold passage with the answer swapped "
        "(near-duplicate), one "
        "passage calling other sources outdated (meta-epistemic; padded past the short-passage "
        "bar with the gold page's own sentences: meta-epistemic-long; with sentences no page "
        "holds: meta-epistemic-own; citing a made-up source full of invented names: "
        "meta-epistemic-named, or of the gold page's: meta-epistemic-borrowed), and a "
        "black-box search "
        "against each chain that plants only the passages that survived it (filter-aware; "
        "budget = calls per target). Sources: rule = rule-based edit, llm = LLM paraphrase, "
        "(published/template/genuine) = where the body came from.",
    )


def _example_html(e: Mapping[str, Any]) -> str:
    verdict = (
        '<span class="bad">attack reached the context</span>'
        if e["reached"]
        else '<span class="good">attack stopped</span>'
    )
    rows = []
    for p in e["passages"]:
        tag = '<span class="tag adv">planted</span> ' if p["planted"] else ""
        state = (
            '<span class="tag ok">kept</span>'
            if p["kept"]
            else '<span class="tag rm">removed</span>'
        )
        if p.get("in_context"):
            state += " <b>in context</b>"
        reasons = "<br>".join(escape(x) for x in p["reasons"]) or (
            "–" if p["kept"] else "removed (no reason recorded)"
        )
        text = p["kept_text"] if p["kept"] and p["kept_text"] != p["text"] else p["text"]
        edited = " <em>(kept text after sentence removal)</em>" if text != p["text"] else ""
        label = f"{tag}{escape(p['id'])}"
        if p["planted"]:
            mine = " (this question)" if p["for_question"] == e["question_id"] else ""
            label += f"<br><em>{escape(p['attack'])}, planted for {escape(p['for_question'])}</em>"
            label += mine
        rows.append([label, f'<div class="passage">{escape(text)}{edited}</div>', state, reasons])
    answers = ", ".join(escape(a) for a in e["answers"]) or "–"
    return (
        f'<div class="example"><p><b>{escape(e["question"])}</b><br>'
        f'<span class="muted">setting {escape(e["setting"])}, chain {escape(e["defense"])}, '
        f"id {escape(e['question_id'])}, right answer: {answers}, attacker's target: "
        f"{escape(e['target']) or '–'}</span> "
        f"— {verdict}</p>"
        + _table(["retrieved passage", "text", "decision", "defense reasons"], rows, numeric=False)
        + "</div>"
    )


def _examples(scan: ScanResult, n: int = 4) -> str:
    rec = scan.recommendation.chain
    mine = [e for e in scan.examples if e["defense"] == rec]
    reached = [e for e in mine if e["reached"]]
    if reached:
        intro = (
            f"<p>Questions where a planted passage still reached the context under "
            f"<b>{escape(rec)}</b>, with every decision the chain made.</p>"
        )
        pick = _spread(reached, n)
    else:
        intro = (
            f"<p class='good'>No attack reached the context under {escape(rec)}. Questions "
            "where the attack was retrieved and stopped, with the reasons:</p>"
        )
        pick = _spread(mine, n)
    if not pick:
        return "<p>No planted passage was retrieved for any question.</p>"
    return intro + "".join(_example_html(e) for e in pick)


def _spread(items: Sequence[Mapping[str, Any]], n: int) -> list[Mapping[str, Any]]:
    """At most ``n`` examples, one per setting first, so every attack kind shows."""
    out: list[Mapping[str, Any]] = []
    seen: set[str] = set()
    for e in items:
        if e["setting"] not in seen and len(out) < n:
            seen.add(e["setting"])
            out.append(e)
    out += [e for e in items if e not in out][: n - len(out)]
    return out


def _extraction(scan: ScanResult) -> str:
    """CRR per chain and attack (the ``extraction`` setting), its curve, what was left out."""
    from ragshield.eval.extraction_curve import curve_svg

    if not scan.extraction:
        return ""
    rows = [
        [escape(c.chain), escape(c.attack), escape(c.crr_text), f"{c.recovered}/{c.n_chunks}",
         str(c.queries), escape(c.curve_text), str(c.chunks_reached), f"{c.seconds:.1f}",
         escape(c.stop_reason)]
        for c in scan.extraction
    ]  # fmt: skip
    notes = "".join(f"<li>{escape(n)}</li>" for n in scan.notes.get("extraction", []))
    curves = {f"{c.chain} × {c.attack}": c.curve for c in scan.extraction if not c.not_measured}
    return (
        "<h2>Extraction (chunk recovery rate)</h2><p class='muted'>Black-box extraction "
        "attacks through the pipeline of each chain on the index copy; a chunk is recovered "
        "when an answer holds a span with ROUGE-L F1 &gt; 0.5 and cosine &gt; 0.85 to it "
        "(RAGFort §5.1).</p>"
        + _table(
            [
                "chain",
                "attack",
                "CRR",
                "recovered",
                "queries",
                "CRR after (queries: CRR)",
                "chunks reached",
                "seconds",
                "stopped by",
            ],
            rows,
        )
        + curve_svg(curves)
        + (f"<ul class='muted'>{notes}</ul>" if notes else "")
    )


def _intervals(cells: Sequence[Cell]) -> str:
    """Every rate with its 95 % interval, the OWASP/ATLAS ids and the gate's verdict."""
    if not cells:
        return ""
    from ragshield.eval.intervals import METHOD

    keys = list(dict.fromkeys(k for c in cells for k in c.rates))
    rows = []
    for c in cells:
        rates = [
            f"{r.value:.3f} [{r.lo:.3f}–{r.hi:.3f}]" if (r := c.rates.get(k)) else "–" for k in keys
        ]
        verdict = ("<span class='bad'>FAIL</span> " + escape("; ".join(c.failures))
                   if c.failures else escape("; ".join(c.exceeded)) or "–")  # fmt: skip
        rows.append([escape(c.name), escape(c.chain), *rates,
                     escape(" ".join(c.tags.owasp)), escape(" ".join(c.tags.atlas)), verdict])  # fmt: skip
    return (
        "<h2>Rates with 95 % intervals, tags and gate</h2><p class='muted'>Each rate is "
        f"successes/questions with a {escape(METHOD)} interval (Wilson 1927): a "
        "<code>--fail-on</code> rule is checked against the interval's bound unless "
        "<code>--fail-on-point</code> is given. Tags: OWASP LLM Top-10 2025 and MITRE ATLAS "
        "ids of the attack setting.</p>"
        + _table(
            ["setting", "chain", *keys, "OWASP", "ATLAS", "finding / gate"], rows, numeric=False
        )
    )


def render_report(scan: ScanResult, cells: Sequence[Cell] = ()) -> str:
    r = scan.results
    rec = scan.recommendation
    attacked = [s for s in dict.fromkeys(row.setting for row in r.rows) if s != "clean"]
    defenses = list(dict.fromkeys(row.defense for row in r.rows))
    chart = bar_chart(
        {s: {d: r.get(d, s).metrics["attack_reaches"] for d in defenses} for s in attacked},
        "attack reaches the generator's context (lower is better)",
    )
    if "asr" in r.rows[0].metrics:  # with a generator: what the attacks did to the answers
        chart += bar_chart(
            {s: {d: r.get(d, s).metrics["asr"] for d in defenses} for s in attacked},
            "end-to-end ASR: the answer names the attacker's target (lower is better)",
        )
    when = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    template = (
        "<p class='muted'>Questions are <b>template questions</b>: a few words around a number "
        "or name of a sampled passage, that word blanked out (it is the answer) — not real "
        "user questions. Attackers' targets are numbers or names from the index that answer "
        "no question.</p>"
        if scan.question_source == "template questions"
        else ""
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>ragshield scan — {escape(scan.index)}</title>
<style>{_CSS}</style></head><body>
<h1>ragshield scan: {escape(scan.index)}</h1>
<p class="muted">generated {when}. Attacks were planted into an in-memory copy of the index;
every question was retrieved for real and every defense chain filtered its top-{r.k}.</p>
<h2>Summary</h2>{_summary(scan)}{template}
<h2>Recommended configuration</h2>
<div class="box" id="recommendation"><p><b>--filter {escape(rec.chain)}</b></p>
<p>{escape(rec.reason)}.</p><p class="muted">clean {escape(rec.quality_metric)}:
{rec.clean_quality:.3f} (no defense {rec.baseline_quality:.3f}); chains within tolerance:
{escape(", ".join(rec.eligible))}</p></div>
<h2>Attack reaches per defense</h2>{chart}
<p class="muted"><b>attack reaches</b>: a planted passage is among the {r.context_k} passages a
generator reads, with its payload (target answer, instruction, suffix) still in its text.
Planted texts are labelled: <b>llm</b> = written for each question by ragshield's
generators (PoisonedRAG and misleading passages by the LLM, typo copies by a genetic
search), <b>shared</b> = published attack texts, <b>template</b> = ragshield's attack
templates.</p>
{_adaptive(scan)}<h2>Results per attack</h2>{_setting_tables(scan)}
<p class="muted"><b>benign removed</b> counts a benign passage as removed when the defense
does not return that very passage: a sentence-level filter (EcoSafeRAG) returns a rewritten
copy of every passage it keeps, so its figure is an upper bound; <b>answer kept</b> says
whether the right answer still reached the context. <b>filter ms/q</b> is wall time per
question with one encoder shared by every chain, whose cache keeps each text's vector: the
first chain to meet a sentence pays for encoding it, later chains reuse it.</p>
{_extraction(scan)}{_intervals(cells)}<h2>Worst examples</h2>{_examples(scan)}
</body></html>
"""
