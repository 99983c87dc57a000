#!/usr/bin/env python3
"""Adapt all-MiniLM-L6-v2 to Godot's docs (issue 73); run it through
scripts/train-godot-model, which makes the virtual environment and the
texts it reads.

Data, all of it built from what the repository and ../shared hold:
- target/godot-texts.jsonl: every text the host embeds for the 4.6
  reference and manual, with its URI, kind and links (made by the e2e
  command `dump_the_godot_texts`); the reference's entries are what a
  question is answered with, the manual's sections and passages link to
  them.
- tests/fixtures/godot-questions/*.tsv: our question sets (a question,
  the URIs that answer it). A question's positives are its answers' texts
  and the manual passages and sections that link to an answer; its hard
  negatives come from the lexical leg (BM25 over the same texts: the
  entries words rank high that do not answer it).

Training: in-batch contrastive loss (InfoNCE at scale 20, as
sentence-transformers' MultipleNegativesRankingLoss) over each question's
positive, the batch's other positives and one hard negative per
question; candidates that also answer a question are not its negatives.
Seeded; CPU.

Commands:
  compare   leave each question set out in turn: train on the others, and
            print the left-out set's top-1/top-3 by meaning alone over the
            reference's entries, and fused with BM25 (reciprocal ranks),
            for the stock model and the adapted one, as a markdown table.
  final     train on every set; write the model folder (config.json,
            tokenizer.json, model.safetensors in half precision, SOURCE)
            and the vectors of every text in the host's store format,
            computed as the host computes them (matrices in half precision,
            embedding tables a byte per value), for the shipped .vec.
"""
import argparse
import hashlib
import json
import math
import pathlib
import random
import re
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from sentence_transformers import SentenceTransformer, models

SCALE = 20.0


def log(*what):
    print(*what, file=sys.stderr, flush=True)


# --- data -------------------------------------------------------------


def read_texts(path):
    rows = [json.loads(line) for line in path.open()]
    for row in rows:
        row["entry"] = row["kind"] not in ("manual", "passage")
    return rows


def read_sets(folder):
    """{set name: [(question, [uri, ...]), ...]}"""
    sets = {}
    for path in sorted(folder.glob("*.tsv")):
        questions = []
        for line in path.read_text().splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            question, answers = line.split("\t")[:2]
            questions.append((question, answers.split()))
        sets[path.stem] = questions
    return sets


def qualified(uri):
    """godot://symbol/Class/kind/member -> class.member; godot://class/C -> c"""
    parts = uri.split("/")
    if uri.startswith("godot://symbol/") and len(parts) >= 6:
        return f"{parts[3]}.{parts[5]}".lower()
    if uri.startswith("godot://class/"):
        return parts[3].lower()
    return None


def words(text):
    # CamelCase split too: `move_and_slide` and `CharacterBody2D` are words
    # of a question in plain words.
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    return re.findall(r"[a-z0-9]+", text.lower())


class Bm25:
    """The lexical leg, enough to find hard negatives and to fuse with."""

    def __init__(self, texts, k1=1.2, b=0.75):
        self.k1, self.b = k1, b
        self.postings = {}
        self.lengths = np.zeros(len(texts))
        for i, text in enumerate(texts):
            ws = words(text)
            self.lengths[i] = len(ws)
            counts = {}
            for w in ws:
                counts[w] = counts.get(w, 0) + 1
            for w, c in counts.items():
                self.postings.setdefault(w, []).append((i, c))
        self.mean = self.lengths.mean() if len(texts) else 1.0
        self.n = len(texts)

    def scores(self, question):
        scores = np.zeros(self.n)
        for w in set(words(question)):
            posting = self.postings.get(w)
            if not posting:
                continue
            idf = math.log(1 + (self.n - len(posting) + 0.5) / (len(posting) + 0.5))
            for i, c in posting:
                norm = c + self.k1 * (1 - self.b + self.b * self.lengths[i] / self.mean)
                scores[i] += idf * c * (self.k1 + 1) / norm
        return scores


class Corpus:
    def __init__(self, rows):
        self.rows = rows
        self.entries = [i for i, r in enumerate(rows) if r["entry"]]
        self.by_uri = {rows[i]["uri"]: i for i in self.entries}
        self.bm25 = Bm25([rows[i]["text"] for i in self.entries])
        # Sections and passages by the entries they link to.
        self.linking = {}
        for i, r in enumerate(rows):
            if not r["entry"]:
                for link in r["links"]:
                    self.linking.setdefault(link.lower(), []).append(i)

    def examples(self, questions, negatives=30, per_answer_links=3):
        """Per question: (question, its answers' entries, the sections and
        passages that link to an answer, [hard negatives], answer URIs)."""
        out = []
        for question, answers in questions:
            accepted = set(answers)
            entries = [self.by_uri[u] for u in answers if u in self.by_uri]
            links = []
            for uri in answers:
                links += self.linking.get(qualified(uri) or "", [])[:per_answer_links]
            if not entries:
                continue
            lexical = np.argsort(-self.bm25.scores(question))[: negatives * 2]
            hard = [
                self.entries[j]
                for j in lexical
                if self.rows[self.entries[j]]["uri"] not in accepted
            ][:negatives]
            out.append((question, entries, list(dict.fromkeys(links)), hard, accepted))
        return out


# --- the model ----------------------------------------------------------


def load(folder):
    transformer = models.Transformer(str(folder), max_seq_length=128)
    pooling = models.Pooling(transformer.get_word_embedding_dimension(), "mean")
    return SentenceTransformer(modules=[transformer, pooling, models.Normalize()], device="cpu")


def embed(model, texts, batch=64):
    with torch.no_grad():
        return model.encode(texts, batch_size=batch, convert_to_numpy=True, normalize_embeddings=True)


def train(model, corpus, questions, seed, epochs, batch, lr, link_share=0.3):
    """Each epoch, each question once, with one of its positives drawn at
    random (an answer's entry, or a little less often a manual text that
    links to one) and one hard negative."""
    rng = random.Random(seed)
    torch.manual_seed(seed)
    model.train()
    texts = [r["text"] for r in corpus.rows]
    uris = [r["uri"] for r in corpus.rows]
    examples = corpus.examples(questions)
    steps = epochs * math.ceil(len(examples) / batch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup)))
    )
    started, step = time.time(), 0
    for epoch in range(epochs):
        rng.shuffle(examples)
        total = 0.0
        for at in range(0, len(examples), batch):
            chunk = examples[at : at + batch]
            anchors = [e[0] for e in chunk]
            positives = [
                rng.choice(links) if links and rng.random() < link_share else rng.choice(entries)
                for _, entries, links, _, _ in chunk
            ]
            candidates = positives + [rng.choice(hard) for _, _, _, hard, _ in chunk if hard]
            features = model.tokenize(anchors + [texts[c] for c in candidates])
            out = model(features)["sentence_embedding"]
            a, c = out[: len(anchors)], out[len(anchors) :]
            scores = a @ c.T * SCALE
            # A candidate that answers the question too is no negative.
            mask = torch.zeros_like(scores, dtype=torch.bool)
            for i, example in enumerate(chunk):
                for j, cand in enumerate(candidates):
                    if j != i and (uris[cand] in example[4] or cand == candidates[i]):
                        mask[i, j] = True
            scores = scores.masked_fill(mask, float("-inf"))
            loss = F.cross_entropy(scores, torch.arange(len(anchors)))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            total += loss.item() * len(chunk)
            step += 1
        log(f"  epoch {epoch + 1}/{epochs}: loss {total / len(examples):.3f}, {step} steps, {time.time() - started:.0f} s")
    model.eval()
    return len(examples)


# --- measuring ----------------------------------------------------------


def measure(corpus, vectors, model, questions):
    """top-1 and top-3 by meaning alone and fused with BM25, over entries."""
    asked = [q for q, _ in questions]
    qv = embed(model, asked)
    dense1 = dense3 = fused1 = fused3 = 0
    for (question, answers), v in zip(questions, qv):
        accepted = set(answers)
        sims = vectors @ v
        dense = np.argsort(-sims)
        top = [corpus.rows[corpus.entries[j]]["uri"] for j in dense[:3]]
        dense1 += top[0] in accepted
        dense3 += bool(accepted & set(top))
        lexical = np.argsort(-corpus.bm25.scores(question))
        rrf = np.zeros(len(corpus.entries))
        rrf[lexical[:200]] += 1.0 / (60 + np.arange(1, 201))
        rrf[dense[:200]] += 1.0 / (60 + np.arange(1, 201))
        fused = [corpus.rows[corpus.entries[j]]["uri"] for j in np.argsort(-rrf)[:3]]
        fused1 += fused[0] in accepted
        fused3 += bool(accepted & set(fused))
    return dense1, dense3, fused1, fused3


def entry_vectors(model, corpus):
    return embed(model, [corpus.rows[i]["text"] for i in corpus.entries])


# --- the host's form ------------------------------------------------------


def as_host_computes(model):
    """Round the weights as the host holds them: matrices to half
    precision, embedding tables to a byte per value with a scale per row
    (host/embedder/src/compact.rs)."""
    with torch.no_grad():
        for name, tensor in model[0].auto_model.state_dict().items():
            if name.endswith("_embeddings.weight"):
                largest = tensor.abs().amax(dim=1, keepdim=True)
                scale = torch.where(largest > 0, largest / 127.0, torch.ones_like(largest))
                tensor.copy_((tensor / scale).round().clamp(-127, 127) * scale)
            elif tensor.dim() == 2:
                tensor.copy_(tensor.half().float())


def save(model, base, out, note):
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    state = {
        k: v.detach().contiguous().half()
        for k, v in model[0].auto_model.state_dict().items()
        if not k.startswith("pooler.") and not k.endswith("position_ids")
    }
    save_file(state, str(out / "model.safetensors"))
    (out / "model.safetensors").chmod(0o644)
    for file in ("config.json", "tokenizer.json"):
        (out / file).write_bytes((base / file).read_bytes())
    (out / "SOURCE").write_text(note)


def digest(folder):
    """host/embedder/src/model.rs's digest: vectors of one model are not
    another's."""
    h = hashlib.sha256()
    for file in ("config.json", "tokenizer.json", "model.safetensors"):
        data = (folder / file).read_bytes()
        h.update(struct.pack("<Q", len(data)))
        h.update(data)
    return h.digest()


def write_store(path, model_digest, texts, vectors):
    """host/embedder/src/store.rs's format: header, then per text its
    SHA-256, a scale and a byte per dimension."""
    dim = vectors.shape[1]
    out = bytearray(b"MCPVEC01" + model_digest + struct.pack("<I", dim))
    seen = set()
    for text, v in zip(texts, vectors):
        h = hashlib.sha256(text.encode()).digest()
        if h in seen:
            continue
        seen.add(h)
        largest = float(np.abs(v).max())
        scale = largest / 127.0 if largest > 0 else 1.0
        q = np.clip(np.sign(v) * np.floor(np.abs(v) / scale + 0.5), -127, 127).astype(np.int8)
        out += h + struct.pack("<f", scale) + q.tobytes()
    path.write_bytes(bytes(out))
    return len(seen)


# --- commands ------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["compare", "final"])
    ap.add_argument("--base", type=pathlib.Path, required=True, help="the stock model folder")
    ap.add_argument("--texts", type=pathlib.Path, required=True)
    ap.add_argument("--sets", type=pathlib.Path, required=True)
    ap.add_argument("--out", type=pathlib.Path, help="final: the model folder to write")
    ap.add_argument("--vectors", type=pathlib.Path, help="final: the .vec to write")
    ap.add_argument("--folds", type=int, default=4, help="compare: sets are left out this many groups at a time")
    ap.add_argument("--only", type=int, nargs="*", help="compare: run only these folds (0-based)")
    ap.add_argument("--seed", type=int, default=73)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-5)
    args = ap.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    corpus = Corpus(read_texts(args.texts))
    sets = read_sets(args.sets)
    log(f"{len(corpus.rows)} texts, {len(corpus.entries)} entries; sets: " + ", ".join(f"{k} {len(v)}" for k, v in sets.items()))
    settings = f"seed {args.seed}, {args.epochs} epochs, batch {args.batch}, lr {args.lr}"
    if args.command == "compare":
        stock = load(args.base)
        started = time.time()
        # The stock model's vectors are the same each run: kept.
        key = hashlib.sha256(digest(args.base) + json.dumps([corpus.rows[i]["text"] for i in corpus.entries]).encode()).hexdigest()[:16]
        kept = pathlib.Path.home() / ".cache/mcp-host-train" / f"stock-{key}.npy"
        if kept.exists():
            stock_vectors = np.load(kept)
        else:
            stock_vectors = entry_vectors(stock, corpus)
            kept.parent.mkdir(parents=True, exist_ok=True)
            np.save(kept, stock_vectors)
        log(f"stock entries embedded in {time.time() - started:.0f} s")
        print(f"| set left out | questions | stock: meaning top-1 / top-3 | adapted | stock: fused with BM25 top-1 / top-3 | adapted |  ({settings})")
        print("|---|---|---|---|---|---|")
        names = list(sets)
        folds = [names[k :: args.folds] for k in range(args.folds)]
        totals = np.zeros(8, dtype=int)
        asked = 0
        for k, fold in enumerate(folds):
            if args.only is not None and k not in args.only:
                continue
            training = [q for other, qs in sets.items() if other not in fold for q in qs]
            model = load(args.base)
            started = time.time()
            n = train(model, corpus, training, args.seed, args.epochs, args.batch, args.lr)
            as_host_computes(model)
            vectors = entry_vectors(model, corpus)
            log(f"fold {k} ({', '.join(fold)} left out): {n} questions trained on; trained and embedded in {time.time() - started:.0f} s")
            for name in fold:
                held = sets[name]
                b = measure(corpus, stock_vectors, stock, held)
                a = measure(corpus, vectors, model, held)
                totals += np.array(b + a)
                asked += len(held)
                print(f"| {name} | {len(held)} | {b[0]} / {b[1]} | {a[0]} / {a[1]} | {b[2]} / {b[3]} | {a[2]} / {a[3]} |", flush=True)
        t = totals
        print(f"| all | {asked} | {t[0]} / {t[1]} | {t[4]} / {t[5]} | {t[2]} / {t[3]} | {t[6]} / {t[7]} |")
    else:
        model = load(args.base)
        training = [q for qs in sets.values() for q in qs]
        n = train(model, corpus, training, args.seed, args.epochs, args.batch, args.lr)
        as_host_computes(model)
        note = (
            "godot-minilm-l6: all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) adapted to Godot's docs by\n"
            f"scripts/train-godot-model on {len(training)} questions ({n} examples), {settings}.\n"
            "Apache-2.0, as the model it was trained from. Weights in half precision.\n"
        )
        save(model, args.base, args.out, note)
        texts = [r["text"] for r in corpus.rows]
        started = time.time()
        count = write_store(args.vectors, digest(args.out), texts, embed(model, texts))
        log(f"{args.out} written; {count} vectors in {args.vectors} ({time.time() - started:.0f} s)")


if __name__ == "__main__":
    main()
