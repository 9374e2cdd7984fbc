"""``/v1/chat/completions`` vs ``/v1/ask``: what the OpenAI face costs on a live server.

Run: python benchmarks/bench_server_openai.py [--n 30]

One uvicorn server on loopback (demo index, RAGDefender chain, extractive generator, a
SQLite audit file), the official ``openai`` client for the chat endpoint (non-streaming and
streaming, time to the last chunk) and httpx for ``/v1/ask``; the same question list,
round-robin, ``--n`` requests per route after 3 warm-up requests. Medians and p90 in ms.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=30)
    args = ap.parse_args()
    import httpx
    import openai
    import uvicorn

    from ragshield.corpus import read_corpus
    from ragshield.demo import demo_files
    from ragshield.indexing import build_index
    from ragshield.server import Service, create_app, load_config

    root = Path(tempfile.mkdtemp(prefix="bench-openai-"))
    build_index(read_corpus(demo_files()[0]), root / "idx")
    cfg = load_config(None, index=str(root / "idx"), storage={"sqlite_path": str(root / "a.db")},
                      defenses={"chain": ["ragdefender"]},
                      limits={"requests_per_minute": 100000, "requests_per_day": 1000000})  # fmt: skip
    service = Service.from_config(cfg)
    _, key = service.keys.create("bench")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(service), host="127.0.0.1", port=port,
                                           log_level="warning"))  # fmt: skip
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}"
    qs = ["What is the capital of Australia?", "Who designed the Eiffel Tower?",
          "When was penicillin discovered?", "Who invented the World Wide Web?"]  # fmt: skip
    client = openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)
    http = httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=60)

    def ask(q: str) -> None:
        http.post(f"{base}/v1/ask", json={"question": q}).raise_for_status()

    def chat(q: str) -> None:
        client.chat.completions.create(model="ragshield",
                                       messages=[{"role": "user", "content": q}])  # fmt: skip

    def stream(q: str) -> None:
        for _ in client.chat.completions.create(
            model="ragshield", messages=[{"role": "user", "content": q}], stream=True
        ):
            pass

    print(f"demo index (30 passages), ragdefender, extractive generator, n={args.n} per route")
    print("| route | median ms | p90 ms |\n|---|---|---|")
    for name, fn in (("POST /v1/ask (httpx)", ask), ("chat.completions (openai)", chat),
                     ("chat.completions stream=True (openai)", stream)):  # fmt: skip
        for q in qs[:3]:
            fn(q)
        times = []
        for i in range(args.n):
            t0 = time.perf_counter()
            fn(qs[i % len(qs)])
            times.append((time.perf_counter() - t0) * 1000)
        p90 = statistics.quantiles(times, n=10)[-1]
        print(f"| {name} | {statistics.median(times):.1f} | {p90:.1f} |", flush=True)
    server.should_exit = True
    service.close()


if __name__ == "__main__":
    main()
