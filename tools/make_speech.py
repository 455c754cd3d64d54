#!/usr/bin/env python3
"""Makes English test speech for the Whisper tests with espeak-ng (Debian package espeak-ng):
three short sentences (s1.wav, s2.wav, s3.wav) and one clip longer than 30 s (long.wav, the
sentences of LONG with half a second of silence between them) for long-form transcription, plus
speech.json: {name: spoken text}. The files are mono PCM16 at 16 kHz: espeak-ng's 22050 Hz output
is resampled with the Debian libsoxr (SOXR_HQ) that the C++ side links, as
tools/gen_audio_references.py does, so a test reads the same samples HF is given.

    .venv/bin/python tools/make_speech.py OUT_DIR"""
import argparse
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile
import wave

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from gen_audio_references import soxr_resample, write_wav  # noqa: E402

RATE = 16000
SHORT = {
    "s1": "The quick brown fox jumps over the lazy dog.",
    "s2": "Please call me back when you get home tonight.",
    "s3": "The weather today is sunny and warm.",
}
LONG = [
    "Good morning, everyone, and thank you for joining the meeting.",
    "Today we will talk about the new office and the plans for next year.",
    "The building is close to the train station, so most of you can walk to work.",
    "There is a large kitchen, a quiet room for phone calls, and space for twenty desks.",
    "We hope to move in the first week of March, after the painters are done.",
    "Please tell your manager if you need a parking space or a locker.",
    "We will send the floor plan by email before the end of the month.",
    "If you have any questions, write them down and we will answer them on Friday.",
    "Thank you all for listening, and have a nice weekend.",
]
LONG_MIN_SECONDS = 30.0


def speak(text, tmp):
    """espeak-ng's voice for `text` as float samples at 16 kHz."""
    path = pathlib.Path(tmp) / "espeak.wav"
    subprocess.run(["espeak-ng", "-v", "en-us", "-w", str(path), text], check=True)
    with wave.open(str(path), "rb") as w:
        if w.getnchannels() != 1 or w.getsampwidth() != 2:
            sys.exit(f"make_speech: espeak-ng wrote {w.getnchannels()} channels of "
                     f"{8 * w.getsampwidth()} bits, expected mono PCM16")
        rate = w.getframerate()
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    x = pcm.astype(np.float32) / 32768.0
    return x if rate == RATE else soxr_resample(x, rate, RATE)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=pathlib.Path, help="folder for the WAV files and speech.json")
    out = parser.parse_args().out
    if shutil.which("espeak-ng") is None:
        sys.exit("make_speech: espeak-ng is not installed (apt-get install -y espeak-ng)")
    out.mkdir(parents=True, exist_ok=True)
    texts = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in SHORT.items():
            write_wav(out / f"{name}.wav", [speak(text, tmp)], RATE)
            texts[name] = text
        gap = np.zeros(RATE // 2, dtype=np.float32)
        pieces = []
        for text in LONG:
            pieces += [speak(text, tmp), gap]
        long = np.concatenate(pieces[:-1])
        if len(long) < LONG_MIN_SECONDS * RATE:
            sys.exit(f"make_speech: the long clip is {len(long) / RATE:.1f} s, "
                     f"not over {LONG_MIN_SECONDS:.0f} s")
        write_wav(out / "long.wav", [long], RATE)
        texts["long"] = " ".join(LONG)
    (out / "speech.json").write_text(json.dumps(texts, indent=2) + "\n")
    for name in texts:
        with wave.open(str(out / f"{name}.wav"), "rb") as w:
            print(f"make_speech: {out / name}.wav {w.getnframes() / RATE:.1f} s")


if __name__ == "__main__":
    main()
