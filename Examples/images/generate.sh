#!/usr/bin/env bash
# Regenerates the example images (committed; ImageMagick is only needed to remake them).
# All are synthetic: gradients, fractal plasma with a fixed seed, and drawn shapes.
set -euo pipefail
cd "$(dirname "$0")"
IM=${IM:-convert}
# A landscape photo-like JPEG: plasma sky over a gradient, with a sun.
$IM -seed 7 -size 2400x1600 plasma:skyblue-steelblue \( -size 2400x700 gradient:'#c2b280'-'#5a4a2a' \) -gravity south -composite \
  -fill '#ffd54f' -draw 'circle 1800,450 1800,600' -quality 90 dunes.jpg
# A portrait JPEG stored sideways with EXIF Orientation 6 (must come out upright).
$IM -seed 11 -size 1800x1200 plasma:tomato-gold -fill white -draw 'rectangle 0,0 300,1200' -quality 88 portrait-raw.jpg
python3 - <<'PY'
# Insert a minimal EXIF block (APP1) holding Orientation = 6 right after the JPEG's SOI marker.
import struct
tiff = b"MM\x00\x2a" + struct.pack(">I", 8) + struct.pack(">H", 1) + struct.pack(">HHIHH", 0x0112, 3, 1, 6, 0) + struct.pack(">I", 0)
app1 = b"Exif\x00\x00" + tiff
data = open("portrait-raw.jpg", "rb").read()
open("portrait-rotated.jpg", "wb").write(data[:2] + b"\xff\xe1" + struct.pack(">H", len(app1) + 2) + app1 + data[2:])
PY
rm portrait-raw.jpg
# A PNG with transparency: concentric rings.
$IM -size 1024x1024 xc:none -fill '#1e88e5' -draw 'circle 512,512 512,40' -fill none -stroke '#ffffff' -strokewidth 24 \
  -draw 'circle 512,512 512,200' -draw 'circle 512,512 512,330' rings.png
# A WebP of a checker pattern with a diagonal band.
$IM -size 120x80 pattern:checkerboard -scale 1000% -fill '#43a047' -draw 'polygon 0,800 200,800 1200,0 1000,0' -quality 85 checker.webp
