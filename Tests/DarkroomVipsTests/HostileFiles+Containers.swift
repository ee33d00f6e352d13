import Foundation

/// AVIF containers and interlaced or animated PNGs built byte by byte.
extension HostileFiles {
  // MARK: AVIF

  /// A minimal AVIF: one `av01` item whose `ispe` says `ispe`, with an AV1 sequence header
  /// declaring `sequence` (a reduced still-picture header) in the item's data, or in the `av1C`
  /// configuration OBUs when `inConfiguration`. No frame follows: only the headers are real.
  /// With `inIDAT` the item's data lies in `meta`'s `idat` (`iloc` version 1, construction method
  /// 1), followed by a second, decoy `idat` holding `decoy`; `extraExtents` adds that many empty
  /// extents (offset and length of no bytes: "the whole file").
  static func avif(
    ispe: (Int, Int), sequence: (Int, Int), inConfiguration: Bool = false, inIDAT: Bool = false,
    decoy: Data = Data([0x12, 0x00]), extraExtents: Int = 0
  ) -> Data {
    let header = sequenceHeaderOBU(width: sequence.0, height: sequence.1)
    let configuration = box("av1C", Data([0x81, 0x1F, 0x0C, 0x00]) + (inConfiguration ? header : Data()))
    let itemData = inConfiguration ? Data([0x12, 0x00]) : header  // a temporal delimiter, or the header
    return heifFile(
      brands: "avifavifmif1miaf", itemType: "av01", configuration: configuration, ispe: ispe, itemData: itemData,
      inIDAT: inIDAT, decoy: decoy, extraExtents: extraExtents)
  }

  /// A HEIF file of one item of `itemType` (`ftyp` brands: the major one, then the compatible ones,
  /// four letters each), with `ispe` and `configuration` as its properties and `itemData` in
  /// `mdat`, or in `meta`'s `idat` followed by a decoy `idat` (see ``avif(ispe:sequence:inConfiguration:inIDAT:decoy:extraExtents:)``).
  static func heifFile(
    brands: String, itemType: String, configuration: Data, ispe: (Int, Int), itemData: Data, inIDAT: Bool = false,
    decoy: Data = Data(), extraExtents: Int = 0
  ) -> Data {
    let brandBytes = Data(brands.utf8)
    let ftyp = box("ftyp", brandBytes.prefix(4) + be32(0) + brandBytes.dropFirst(4))
    func meta(itemOffset: Int) -> Data {
      let hdlr = fullBox("hdlr", be32(0) + Data("pict".utf8) + Data(count: 12) + Data([0]))
      let pitm = fullBox("pitm", be16(1))
      let infe = fullBox("infe", be16(1) + be16(0) + Data(itemType.utf8) + Data([0]), version: 2)
      let iinf = fullBox("iinf", be16(1) + infe)
      var iloc = fullBox(
        "iloc", Data([0x44, 0x00]) + be16(1) + be16(1) + be16(0) + be16(1) + be32(itemOffset) + be32(itemData.count))
      if inIDAT {
        let item = be16(1) + be16(1) + be16(0) + be16(1) + be32(0) + be32(itemData.count)  // method 1: idat
        iloc = fullBox("iloc", Data([0x44, 0x00]) + be16(1) + item, version: 1)
      }
      if extraExtents > 0 {
        iloc += fullBox("iloc", Data([0x00, 0x00]) + be16(1) + be16(1) + be16(0) + be16(extraExtents))
      }
      let ipco = box("ipco", fullBox("ispe", be32(ispe.0) + be32(ispe.1)) + configuration)
      let ipma = fullBox("ipma", be32(1) + be16(1) + Data([2, 0x81, 0x82]))
      let data = inIDAT ? box("idat", itemData) + box("idat", decoy) : Data()
      return fullBox("meta", hdlr + pitm + iinf + iloc + box("iprp", ipco + ipma) + data)
    }
    let withoutOffset = ftyp + meta(itemOffset: 0)
    let file = ftyp + meta(itemOffset: withoutOffset.count + 8)
    return inIDAT ? file : file + box("mdat", itemData)
  }

  /// An AV1 sequence header OBU (type 1, with its size) for a still picture of `width`×`height`.
  static func sequenceHeaderOBU(width: Int, height: Int) -> Data {
    var bits: [Bool] = []
    func put(_ value: Int, _ count: Int) { for shift in (0..<count).reversed() { bits.append((value >> shift) & 1 == 1) } }
    put(0, 3)  // seq_profile
    put(1, 1)  // still_picture
    put(1, 1)  // reduced_still_picture_header
    put(31, 5)  // seq_level_idx[0]
    put(15, 4)  // frame_width_bits_minus_1
    put(15, 4)  // frame_height_bits_minus_1
    put(width - 1, 16)
    put(height - 1, 16)
    put(0, 8)  // the rest of the header, cut short
    var payload = Data()
    for start in stride(from: 0, to: bits.count, by: 8) {
      payload.append(
        bits[start..<min(start + 8, bits.count)].enumerated().reduce(0) { $0 | ($1.element ? 0x80 >> $1.offset : 0) })
    }
    return Data([0x0A, UInt8(payload.count)]) + payload
  }

  static func box(_ type: String, _ body: Data) -> Data { be32(8 + body.count) + Data(type.utf8) + body }
  static func fullBox(_ type: String, _ body: Data, version: UInt8 = 0) -> Data { box(type, Data([version, 0, 0, 0]) + body) }
  static func be16(_ value: Int) -> Data { Data([UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]) }

  // MARK: PNG

  /// A complete PNG of `width`×`height` zero pixels: colour type 2 (RGB) or 6 (RGBA), 8 or 16
  /// bits a sample, Adam7-interlaced or not, with `before` and `after` placed around the pixel data.
  static func zeroPNG(
    width: Int, height: Int, colourType: UInt8 = 2, bitDepth: UInt8 = 8, interlaced: Bool, before: [Data] = [],
    after: [Data] = []
  ) -> Data {
    let samples = colourType == 6 ? 4 : 3
    let bytesPerPixel = samples * Int(bitDepth) / 8
    var png = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
    png.append(pngChunk("IHDR", be32(width) + be32(height) + Data([bitDepth, colourType, 0, 0, interlaced ? 1 : 0])))
    for chunk in before { png.append(chunk) }
    let passes =
      interlaced
      ? [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)] : [(0, 0, 1, 1)]
    var raw = 0
    for (x, y, dx, dy) in passes {
      let columns = width > x ? (width - x + dx - 1) / dx : 0
      let rows = height > y ? (height - y + dy - 1) / dy : 0
      if columns > 0 { raw += rows * (1 + columns * bytesPerPixel) }
    }
    png.append(pngChunk("IDAT", deflate(Data(count: raw))))
    for chunk in after { png.append(chunk) }
    png.append(pngChunk("IEND", Data()))
    return png
  }

  /// The animation chunks of an APNG of `frames` frames whose default image is the first
  /// (`acTL`, then per frame an `fcTL` and, after the first, an `fdAT` holding `data`).
  static func animationChunks(width: Int, height: Int, frames: Int, data: Data) -> (control: Data, frames: [Data]) {
    let control = pngChunk("acTL", be32(frames) + be32(0))
    var chunks: [Data] = []
    var sequence = 0
    for frame in 0..<frames {
      let fcTL = be32(sequence) + be32(width) + be32(height) + be32(0) + be32(0) + be16(1) + be16(10) + Data([0, 0])
      chunks.append(pngChunk("fcTL", fcTL))
      sequence += 1
      if frame > 0 {
        chunks.append(pngChunk("fdAT", be32(sequence) + data))
        sequence += 1
      }
    }
    return (control, chunks)
  }
}

/// HEIC containers built byte by byte.
extension HostileFiles {
  /// A minimal HEIC: one `hvc1` item whose `ispe` says `ispe`, with an HEVC sequence parameter set
  /// declaring `sps` in the `hvcC` configuration, or in the item's data when `inData`. No picture
  /// follows: only the headers are real.
  static func heic(ispe: (Int, Int), sps: (Int, Int), inData: Bool = false, declaredLengthSize: Int = 4) -> Data {
    let unit = spsNAL(width: sps.0, height: sps.1)
    let delimiter = Data([0x46, 0x01, 0x50])  // an access unit delimiter
    var configuration = Data([
      1, 0x01, 0x60, 0, 0, 0, 0x90, 0, 0, 0, 0, 0, 90, 0xF0, 0x00, 0xFC, 0xFD, 0xF8, 0xF8, 0, 0,
      0x0C | UInt8(declaredLengthSize - 1),
    ])
    configuration.append(inData ? 0 : 1)
    if !inData { configuration += Data([0xA1]) + be16(1) + be16(unit.count) + unit }
    let itemData = be32(delimiter.count) + delimiter + (inData ? be32(unit.count) + unit : Data())
    return heifFile(
      brands: "heicmif1heic", itemType: "hvc1", configuration: box("hvcC", configuration), ispe: ispe, itemData: itemData)
  }

  /// An HEVC sequence parameter set NAL unit (Main profile, 4:2:0) of `width`×`height`, with
  /// emulation-prevention bytes where its payload needs them.
  static func spsNAL(width: Int, height: Int) -> Data {
    var bits: [Bool] = []
    func put(_ value: Int, _ count: Int) { for shift in (0..<count).reversed() { bits.append((value >> shift) & 1 == 1) } }
    func golomb(_ value: Int) {
      let code = value + 1
      let length = Int.bitWidth - code.leadingZeroBitCount
      put(0, length - 1)
      put(code, length)
    }
    put(0, 4)  // sps_video_parameter_set_id
    put(0, 3)  // sps_max_sub_layers_minus1
    put(1, 1)  // sps_temporal_id_nesting_flag
    put(0b0000_0001, 8)  // profile space, tier, Main profile
    put(0x6000_0000, 32)  // compatibility flags
    put(0b1001, 4)  // progressive, interlaced, non-packed, frame-only
    put(0, 44)  // constraint flags
    put(90, 8)  // general_level_idc
    golomb(0)  // sps_seq_parameter_set_id
    golomb(1)  // chroma_format_idc: 4:2:0
    golomb(width)
    golomb(height)
    put(1, 1)  // the rest cut short: stop bit
    while bits.count % 8 != 0 { bits.append(false) }
    var payload: [UInt8] = []
    for start in stride(from: 0, to: bits.count, by: 8) {
      let byte = bits[start..<start + 8].enumerated().reduce(UInt8(0)) { $0 | ($1.element ? 0x80 >> UInt8($1.offset) : 0) }
      // Emulation prevention: no 00 00 followed by 00–03 inside a NAL unit.
      if payload.count >= 2, payload[payload.count - 1] == 0, payload[payload.count - 2] == 0, byte <= 3 { payload.append(3) }
      payload.append(byte)
    }
    return Data([0x42, 0x01] + payload)
  }
}

/// Tiled TIFFs with separate colour planes, built byte by byte.
extension HostileFiles {
  /// A little-endian, uncompressed, 8-bit TIFF of `width`×`height` whose `samples` planes
  /// (`pixels`: interleaved, `samples` bytes a pixel) are stored separately in `tile`-sized tiles;
  /// grey when `samples` is 1 or 2, the last sample an unassociated alpha when `samples` is 2 or 4.
  static func planarTiledTIFF(
    width: Int, height: Int, samples: Int, tile: Int = 16, orientation: Int = 1, associatedAlpha: Bool = false,
    pixels: [UInt8]
  ) -> Data {
    let across = (width + tile - 1) / tile
    let down = (height + tile - 1) / tile
    var tiles: [Data] = []
    for plane in 0..<samples {
      for row in 0..<down {
        for column in 0..<across {
          var data = Data(count: tile * tile)
          for y in 0..<tile where row * tile + y < height {
            for x in 0..<tile where column * tile + x < width {
              data[y * tile + x] = pixels[((row * tile + y) * width + column * tile + x) * samples + plane]
            }
          }
          tiles.append(data)
        }
      }
    }
    let alpha = samples == 2 || samples == 4
    var entries: [(tag: Int, type: Int, values: [Int])] = [
      (256, 4, [width]), (257, 4, [height]), (258, 3, Array(repeating: 8, count: samples)), (259, 3, [1]),
      (262, 3, [samples >= 3 ? 2 : 1]), (274, 3, [orientation]), (277, 3, [samples]), (284, 3, [2]), (322, 4, [tile]),
      (323, 4, [tile]), (324, 4, []), (325, 4, Array(repeating: tile * tile, count: tiles.count)),
    ]
    if alpha { entries.append((338, 3, [associatedAlpha ? 1 : 2])) }
    // Layout: header, IFD, out-of-line values, tiles.
    let ifdSize = 2 + 12 * entries.count + 4
    func size(_ entry: (tag: Int, type: Int, values: [Int])) -> Int { entry.values.count * (entry.type == 3 ? 2 : 4) }
    let offsetsCount = tiles.count * 4
    var outOfLine = 0
    for entry in entries where entry.tag != 324 && size(entry) > 4 { outOfLine += size(entry) }
    if offsetsCount > 4 { outOfLine += offsetsCount }
    var next = 8 + ifdSize + outOfLine
    let offsets = tiles.map { tile -> Int in
      defer { next += tile.count }
      return next
    }
    entries = entries.map { $0.tag == 324 ? (324, 4, offsets) : $0 }
    var ifd = le16(entries.count)
    var extra = Data()
    for entry in entries {
      var values = Data()
      for value in entry.values { values.append(entry.type == 3 ? le16(value) : le32(value)) }
      ifd.append(le16(entry.tag) + le16(entry.type) + le32(entry.values.count))
      if values.count <= 4 {
        ifd.append(values + Data(count: 4 - values.count))
      } else {
        ifd.append(le32(8 + ifdSize + extra.count))
        extra.append(values)
      }
    }
    ifd.append(le32(0))
    return Data([0x49, 0x49, 42, 0]) + le32(8) + ifd + extra + tiles.reduce(Data(), +)
  }
}
