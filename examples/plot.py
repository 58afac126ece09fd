# Plot a sine and a cosine into out/plot.png with the standard library only (matplotlib
# is not installed here), and write the samples to out/samples.csv.
#
# Run it through airlock:  airlock run --out saved examples/plot.py   (saves saved/plot.png)
# or pass its text as run_code's "code": the PNG comes back as image content and the
# CSV as a text resource. Everything written under out/ (relative to the working
# directory, which is the sandbox's workspace) is returned when the program exits.
import math
import os
import struct
import zlib

WIDTH, HEIGHT = 320, 200
BACKGROUND = (255, 255, 255)
AXIS = (160, 160, 160)
SERIES = [(math.sin, (31, 119, 180)), (math.cos, (255, 127, 14))]


def png(width, height, rows):
    """Encode rows of (r, g, b) tuples as an 8-bit RGB PNG."""

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + bytes(c for px in row for c in px) for row in rows)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def plot():
    pixels = [[BACKGROUND] * WIDTH for _ in range(HEIGHT)]
    mid = HEIGHT // 2
    for x in range(WIDTH):
        pixels[mid][x] = AXIS
    samples = []
    for x in range(WIDTH):
        t = x / WIDTH * 2 * math.pi
        row = [t]
        for fn, colour in SERIES:
            v = fn(t)
            row.append(v)
            y = mid - int(v * (HEIGHT // 2 - 10))
            for dy in (-1, 0, 1):  # a 3-pixel line
                if 0 <= y + dy < HEIGHT:
                    pixels[y + dy][x] = colour
        samples.append(row)
    return pixels, samples


def main():
    pixels, samples = plot()
    os.makedirs("out", exist_ok=True)
    with open("out/plot.png", "wb") as f:
        f.write(png(WIDTH, HEIGHT, pixels))
    with open("out/samples.csv", "w") as f:
        f.write("t,sin,cos\n")
        for t, s, c in samples[::16]:
            f.write(f"{t:.4f},{s:.4f},{c:.4f}\n")
    print(f"wrote out/plot.png ({WIDTH}x{HEIGHT}) and out/samples.csv")


main()
