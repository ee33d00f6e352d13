import CZlib
import Darkroom
import Foundation

/// Small image files whose headers declare what would cost gigabytes, built byte by byte (valid
/// CRCs and structure, lying sizes).
enum HostileFiles {
  // MARK: PNG

  /// A PNG of `width`×`height` 8-bit RGB zero pixels (the data holds `rows` rows), with `chunks`
  /// placed before the pixel data.
  static func png(width: Int, height: Int, rows: Int = 4, before chunks: [Data] = []) -> Data {
    var png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
    var header = Data()
    header.append(be32(width))
    header.append(be32(height))
    header.append(contentsOf: [8, 2, 0, 0, 0])
    png.append(pngChunk("IHDR", header))
    for chunk in chunks { png.append(chunk) }
    let row = 1 + min(width, 4096) * 3
    png.append(pngChunk("IDAT", deflate(Data(count: row * min(rows, height)))))
    png.append(pngChunk("IEND", Data()))
    return png
  }

  /// A PNG chunk; `declaredLength` lies about the body's length (the CRC is the real body's).
  static func pngChunk(_ type: String, _ body: Data, declaredLength: Int? = nil) -> Data {
    var typed = Data(type.utf8)
    typed.append(body)
    var out = be32(declaredLength ?? body.count)
    out.append(typed)
    out.append(be32(Int(crc(typed))))
    return out
  }

  // MARK: WebP

  /// An animated WebP (VP8X + ANIM) with a `width`×`height` canvas and `frames` 1×1 frames at
  /// (`frameX`, `frameY`).
  static func animatedWebP(width: Int, height: Int, frames: Int = 1, frameX: Int = 0, frameY: Int = 0) -> Data {
    let lossless1x1: [UInt8] = [0x2F, 0x00, 0x00, 0x00, 0x00, 0x07, 0x10, 0x11, 0xFD, 0x0F, 0x44, 0x44, 0xFF, 0x03]
    var body = riffChunk("VP8X", Data([0x12, 0, 0, 0]) + le24(width - 1) + le24(height - 1))
    body.append(riffChunk("ANIM", Data([0, 0, 0, 0, 0, 0])))
    let frame =
      le24(frameX / 2) + le24(frameY / 2) + le24(0) + le24(0) + le24(100) + Data([0])
      + riffChunk("VP8L", Data(lossless1x1))
    for _ in 0..<frames { body.append(riffChunk("ANMF", frame)) }
    var riff = Data("RIFF".utf8)
    riff.append(le32(4 + body.count))
    riff.append(Data("WEBP".utf8))
    riff.append(body)
    return riff
  }

  private static func riffChunk(_ type: String, _ body: Data) -> Data {
    var out = Data(type.utf8)
    out.append(le32(body.count))
    out.append(body)
    if body.count % 2 == 1 { out.append(0) }
    return out
  }

  // MARK: TIFF

  /// A little-endian TIFF with one IFD: `samples` samples of `bits` bits, `compression` (1 none,
  /// 8 deflate, 7 JPEG), one strip of `rowsPerStrip` rows (or one `tile`) whose stored bytes are
  /// `data` and whose declared byte count is `declaredCount` (default: the real count).
  static func tiff(
    width: Int, height: Int, samples: Int = 3, bits: Int = 8, compression: Int = 1, rowsPerStrip: Int? = nil,
    tile: (width: Int, height: Int)? = nil, data: Data, declaredCount: Int? = nil
  ) -> Data {
    var entries: [(tag: Int, type: Int, count: Int, value: Int)] = [
      (256, 4, 1, width), (257, 4, 1, height), (259, 3, 1, compression), (262, 3, 1, samples >= 3 ? 2 : 1),
      (277, 3, 1, samples), (284, 3, 1, 1),
    ]
    if samples == 4 { entries.append((338, 3, 1, 2)) }
    if let tile {
      entries += [(322, 4, 1, tile.width), (323, 4, 1, tile.height), (324, 4, 1, 0), (325, 4, 1, 0)]
    } else {
      entries += [(273, 4, 1, 0), (278, 4, 1, rowsPerStrip ?? height), (279, 4, 1, 0)]
    }
    entries.append((258, 3, samples, 0))
    entries.sort { $0.tag < $1.tag }
    let ifdSize = 2 + 12 * entries.count + 4
    // Bits per sample (more than two values) live after the IFD, then the strip or tile data.
    var extra = Data()
    if samples > 2 { for _ in 0..<samples { extra.append(le16(bits)) } }
    let bitsArray = 8 + ifdSize
    let dataOffset = 8 + ifdSize + extra.count
    var tiff = Data([0x49, 0x49, 42, 0])
    tiff.append(le32(8))
    tiff.append(le16(entries.count))
    for entry in entries {
      var value = entry.value
      switch entry.tag {
      case 258: value = samples > 2 ? bitsArray : bits
      case 273, 324: value = dataOffset
      case 279, 325: value = declaredCount ?? data.count
      default: break
      }
      tiff.append(le16(entry.tag))
      tiff.append(le16(entry.type))
      tiff.append(le32(entry.count))
      if entry.type == 3, entry.count == 1 {
        tiff.append(le16(value))
        tiff.append(le16(0))
      } else {
        tiff.append(le32(value))
      }
    }
    tiff.append(le32(0))
    tiff.append(extra)
    tiff.append(data)
    return tiff
  }

  /// An uncompressed RGB TIFF of a diagonal gradient with a bright square (for smart crops).
  static func gradientTIFF(width: Int, height: Int) -> Data {
    var raw = [UInt8](repeating: 0, count: width * height * 3)
    do {
      for y in 0..<height {
        for x in 0..<width {
          let index = (y * width + x) * 3
          let inSquare = x > width * 3 / 5 && x < width * 4 / 5 && y > height / 5 && y < height * 2 / 5
          raw[index] = inSquare ? 250 : UInt8((x * 255) / width)
          raw[index + 1] = inSquare ? 30 : UInt8((y * 255) / height)
          raw[index + 2] = inSquare ? 30 : 90
        }
      }
    }
    return tiff(width: width, height: height, data: Data(raw))
  }

  // MARK: GIF

  /// A GIF89a with a `width`×`height` logical screen and `frames` 1×1 frames.
  static func gif(width: Int, height: Int, frames: Int) -> Data {
    var gif = Data("GIF89a".utf8)
    gif.append(le16(width))
    gif.append(le16(height))
    gif.append(contentsOf: [0x80, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF])
    let frame: [UInt8] = [
      0x21, 0xF9, 0x04, 0x00, 0x01, 0x00, 0x00, 0x00,  // graphic control: 10 ms
      0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0,  // image descriptor: 1×1 at 0,0
      0x02, 0x02, 0x44, 0x01, 0x00,  // LZW data
    ]
    for _ in 0..<frames { gif.append(contentsOf: frame) }
    gif.append(0x3B)
    return gif
  }

  // MARK: Bytes

  static func deflate(_ data: Data) -> Data {
    var length = compressBound(uLong(data.count))
    var out = [UInt8](repeating: 0, count: Int(length))
    let status = data.withUnsafeBytes { raw in
      compress2(&out, &length, raw.bindMemory(to: Bytef.self).baseAddress, uLong(data.count), 9)
    }
    precondition(status == Z_OK, "compress2 failed")
    return Data(out.prefix(Int(length)))
  }

  static func crc(_ data: Data) -> UInt32 {
    data.withUnsafeBytes { UInt32(crc32(0, $0.bindMemory(to: Bytef.self).baseAddress, uInt($0.count))) }
  }

  static func be32(_ value: Int) -> Data {
    let v = UInt32(truncatingIfNeeded: value)
    return Data([UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)])
  }
  static func le32(_ value: Int) -> Data {
    let v = UInt32(truncatingIfNeeded: value)
    return Data([UInt8(v & 0xFF), UInt8((v >> 8) & 0xFF), UInt8((v >> 16) & 0xFF), UInt8(v >> 24)])
  }
  static func le24(_ value: Int) -> Data { le32(value).prefix(3) }
  static func le16(_ value: Int) -> Data {
    let v = UInt16(truncatingIfNeeded: value)
    return Data([UInt8(v & 0xFF), UInt8(v >> 8)])
  }

  /// The bytes as fetched data named `name`.
  static func fetched(_ data: Data, _ name: String) -> FetchedData {
    FetchedData(source: ImageSource(path: name), bytes: ImageBytes(data))
  }
}
