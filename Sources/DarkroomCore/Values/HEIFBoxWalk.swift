/// Walks the ISO-BMFF boxes of a HEIF/AVIF file that say what its decoder will allocate: `ispe`
/// sizes, `av1C` and `hvcC` configurations (with their OBUs or parameter sets), and, through `iinf`
/// and `iloc`, the data of every `av01` and `hvc1` item, searched for sequence headers.
///
/// Only `meta`, `iinf`, `iprp` and `ipco` are descended into, so nesting is at most four deep, and
/// item data is walked OBU header by OBU header (payloads are skipped, not read). The work has
/// fixed budgets, whatever the file's size: 65,536 boxes, 4,096 `iloc` extents and coded items
/// in all, 65,536 OBU or NAL headers in all (a real file has a few dozen of each). A file over a budget
/// is ``exceededBudget``: the decoder refuses it rather than judge it by what was read.
struct HEIFBoxWalk {
  private let bytes: SafeBytes
  private var sizes: [(width: Int, height: Int)] = []
  private var sequenceSizes: [(width: Int, height: Int)] = []
  private var bitDepth = 0
  private var planeSamples = 0.0
  private var av1Items: Set<UInt32> = []
  private var hevcItems: Set<UInt32> = []
  /// The NAL length sizes the `hvcC` configurations give (an `hvc1` item's data is walked with each).
  private var nalLengthSizes: Set<Int> = []
  private var extents: [UInt32: [ItemExtent]] = [:]
  /// Every `idat` directly in `meta` (libheif reads the first; all are searched).
  private var idats: [Range<Int>] = []
  private var boxes = 0
  private var extentCount = 0
  private var obuBudget = HEIFBoxWalk.maxOBUs
  private(set) var exceededBudget = false

  /// Where part of an item's data lies: a file offset, or an offset into `idat`.
  private struct ItemExtent {
    var offset: UInt64
    var length: UInt64
    var inIDAT: Bool
  }

  /// The most `iloc` extents and `av01` items taken in all, and `idat` boxes searched.
  static let maxExtents = 4_096
  static let maxBoxes = 65_536
  static let maxOBUs = 65_536
  static let maxIDATs = 16

  init(_ bytes: SafeBytes) { self.bytes = bytes }

  mutating func run() {
    walk(0..<bytes.count, depth: 0, parent: 0)
    for item in av1Items.union(hevcItems).sorted() where !exceededBudget {
      guard let parts = extents[item] else { continue }
      // Data in `idat` is searched in every candidate box, each as its own stream.
      let alternatives = parts.contains(where: \.inIDAT) ? max(1, idats.count) : 1
      for alternative in 0..<alternatives where !exceededBudget {
        let ranges = parts.compactMap { fileRange($0, idat: alternative) }
        if av1Items.contains(item) { walkOBUs(ranges) }
        if hevcItems.contains(item) {
          // libheif 1.15 reads 4-byte lengths whatever hvcC declares: walked with 4 and with each declared size.
          for lengthSize in nalLengthSizes.union([4]).sorted() { walkNALs(ranges, lengthSize: lengthSize) }
        }
      }
    }
  }

  private mutating func walkNALs(_ ranges: [Range<Int>], lengthSize: Int) {
    var units = HEVCNALWalk(bytes: bytes, ranges: ranges, lengthSize: lengthSize)
    while let size = units.nextPictureSize(budget: &obuBudget) { sequenceSizes.append(size) }
    if obuBudget <= 0 { exceededBudget = true }
  }

  private mutating func walkOBUs(_ ranges: [Range<Int>]) {
    var obus = AV1OBUWalk(bytes: bytes, ranges: ranges)
    while let size = obus.nextSequenceHeaderSize(budget: &obuBudget) { sequenceSizes.append(size) }
    if obuBudget <= 0 { exceededBudget = true }
  }

  func declaration() -> HEIFDeclaration? {
    let all = sizes + sequenceSizes
    func area(_ size: (width: Int, height: Int)) -> UInt64 {
      UInt64(clamping: size.width).multipliedReportingOverflow(by: UInt64(clamping: size.height)).partialValue
    }
    guard let largest = all.filter({ $0.width > 0 && $0.height > 0 }).max(by: { area($0) < area($1) }) else {
      return exceededBudget
        ? HEIFDeclaration(
          width: 0, height: 0, bitDepth: 8, planeSamplesPerPixel: 3, fromSequenceHeader: false, exceededBudget: true)
        : nil
    }
    let fromSequence = sequenceSizes.contains { area($0) == area(largest) }
    return HEIFDeclaration(
      width: largest.width, height: largest.height, bitDepth: bitDepth == 0 ? 8 : bitDepth,
      planeSamplesPerPixel: planeSamples == 0 ? 3 : planeSamples, fromSequenceHeader: fromSequence,
      exceededBudget: exceededBudget)
  }

  private mutating func walk(_ range: Range<Int>, depth: Int, parent: UInt32) {
    var position = range.lowerBound
    while position <= range.upperBound - 8, let size32 = bytes.number(position, length: 4), let type = bytes.fourCC(position + 4)
    {
      boxes += 1
      guard boxes <= Self.maxBoxes else {
        exceededBudget = true
        return
      }
      var header = 8
      var size = Int(size32)
      if size32 == 1 {
        guard let large = bytes.int(position + 8, length: 8) else { return }
        size = large
        header = 16
      } else if size32 == 0 {
        size = range.upperBound - position
      }
      guard size >= header else { return }
      let end = size > range.upperBound - position ? range.upperBound : position + size
      visit(type, body: min(position + header, end)..<end, depth: depth, parent: parent)
      position = end
    }
  }

  private mutating func visit(_ type: UInt32, body: Range<Int>, depth: Int, parent: UInt32) {
    guard depth < 4, !body.isEmpty, !exceededBudget else { return }
    switch type {
    case UInt32(fourCC: "meta"):
      walk(body.lowerBound + 4..<max(body.lowerBound + 4, body.upperBound), depth: depth + 1, parent: type)
    case UInt32(fourCC: "iprp"), UInt32(fourCC: "ipco"): walk(body, depth: depth + 1, parent: type)
    case UInt32(fourCC: "iinf"):
      // A full box, then an entry count of 16 bits (version 0) or 32 bits.
      guard let version = bytes.byte(body.lowerBound) else { return }
      let start = body.lowerBound + 4 + (version == 0 ? 2 : 4)
      walk(start..<max(start, body.upperBound), depth: depth + 1, parent: type)
    case UInt32(fourCC: "infe"): readItemInfo(body)
    case UInt32(fourCC: "ispe"):
      if let width = bytes.int(body.lowerBound + 4, length: 4), let height = bytes.int(body.lowerBound + 8, length: 4) {
        sizes.append((width, height))
      }
    case UInt32(fourCC: "av1C"): readAV1Configuration(body)
    case UInt32(fourCC: "hvcC"): readHEVCConfiguration(body)
    case UInt32(fourCC: "iloc"): readItemLocations(body)
    case UInt32(fourCC: "idat") where parent == UInt32(fourCC: "meta"):
      if idats.count < Self.maxIDATs { idats.append(body) } else { exceededBudget = true }
    default: return
    }
  }

  /// `infe` version 2 or 3: item ID (16 or 32 bits), protection index (16), item type.
  private mutating func readItemInfo(_ body: Range<Int>) {
    guard let version = bytes.byte(body.lowerBound), version >= 2 else { return }
    let idLength = version == 2 ? 2 : 4
    guard let id = bytes.number(body.lowerBound + 4, length: idLength),
      let type = bytes.fourCC(body.lowerBound + 4 + idLength + 2)
    else { return }
    if type == UInt32(fourCC: "av01") { av1Items.insert(UInt32(truncatingIfNeeded: id)) }
    if type == UInt32(fourCC: "hvc1") { hevcItems.insert(UInt32(truncatingIfNeeded: id)) }
    if av1Items.count + hevcItems.count > Self.maxExtents { exceededBudget = true }
  }

  /// `av1C`: marker and version, profile and level, then the sample layout, then config OBUs.
  private mutating func readAV1Configuration(_ body: Range<Int>) {
    guard let layout = bytes.byte(body.lowerBound + 2) else { return }
    let highBitDepth = layout & 0x40 != 0
    let twelveBit = layout & 0x20 != 0
    let monochrome = layout & 0x10 != 0
    let subsampledX = layout & 0x08 != 0
    let subsampledY = layout & 0x04 != 0
    bitDepth = max(bitDepth, highBitDepth ? (twelveBit ? 12 : 10) : 8)
    let chroma = monochrome ? 0 : 2.0 / Double((subsampledX ? 2 : 1) * (subsampledY ? 2 : 1))
    planeSamples = max(planeSamples, 1 + chroma)
    walkOBUs([min(body.lowerBound + 4, body.upperBound)..<body.upperBound])
  }

  /// `hvcC`: the sample layout (bytes 16–18), the NAL length size (byte 21), then arrays of
  /// parameter-set NAL units, whose sequence parameter sets declare the picture size.
  private mutating func readHEVCConfiguration(_ body: Range<Int>) {
    let start = body.lowerBound
    guard let chroma = bytes.byte(start + 16), let luma = bytes.byte(start + 17), let chromaDepth = bytes.byte(start + 18),
      let lengths = bytes.byte(start + 21), let arrays = bytes.byte(start + 22)
    else { return }
    bitDepth = max(bitDepth, 8 + Int(max(luma & 0x07, chromaDepth & 0x07)))
    planeSamples = max(planeSamples, [1, 1.5, 2, 3][Int(chroma & 0x03)])
    if lengths & 0x03 != 2 { nalLengthSizes.insert(Int(lengths & 0x03) + 1) }  // 3 bytes is not a valid size
    var position = start + 23
    for _ in 0..<arrays {
      guard let count = bytes.int(position + 1, length: 2) else { return }
      position += 3
      for _ in 0..<count {
        obuBudget -= 1
        guard obuBudget >= 0, let length = bytes.int(position, length: 2) else {
          if obuBudget < 0 { exceededBudget = true }
          return
        }
        let unit = (0..<min(length, 1_024)).compactMap { bytes.byte(position + 2 + $0) }
        if let size = HEVCSequenceParameterSet.pictureSize(unit) { sequenceSizes.append(size) }
        position += 2 + length
      }
    }
  }

  /// `iloc` versions 0–2: each item's extents, with its base offset and construction method.
  private mutating func readItemLocations(_ body: Range<Int>) {
    guard let version = bytes.byte(body.lowerBound), version <= 2,
      let sizes = bytes.byte(body.lowerBound + 4), let more = bytes.byte(body.lowerBound + 5)
    else { return }
    let offsetSize = Int(sizes >> 4)
    let lengthSize = Int(sizes & 0x0F)
    let baseOffsetSize = Int(more >> 4)
    let indexSize = version == 0 ? 0 : Int(more & 0x0F)
    let countLength = version < 2 ? 2 : 4
    guard [0, 4, 8].contains(offsetSize), [0, 4, 8].contains(lengthSize), [0, 4, 8].contains(baseOffsetSize),
      [0, 4, 8].contains(indexSize), let itemCount = bytes.int(body.lowerBound + 6, length: countLength)
    else { return }
    var position = body.lowerBound + 6 + countLength
    for _ in 0..<min(itemCount, Self.maxExtents) {
      guard let id = bytes.number(position, length: countLength) else { return }
      position += countLength
      var method: UInt64 = 0
      if version >= 1 {
        guard let value = bytes.number(position, length: 2) else { return }
        method = value & 0x0F
        position += 2
      }
      position += 2  // data reference index
      guard let base = bytes.number(position, length: baseOffsetSize), let count = bytes.int(position + baseOffsetSize, length: 2)
      else { return }
      position += baseOffsetSize + 2
      for _ in 0..<count {
        position += indexSize
        guard let offset = bytes.number(position, length: offsetSize),
          let length = bytes.number(position + offsetSize, length: lengthSize)
        else { return }
        position += offsetSize + lengthSize
        extentCount += 1
        guard extentCount <= Self.maxExtents else {
          exceededBudget = true
          return
        }
        // Construction method 2 (data from other items) refers to items walked on their own.
        guard method < 2 else { continue }
        let (start, overflow) = base.addingReportingOverflow(offset)
        guard !overflow else { continue }
        extents[UInt32(truncatingIfNeeded: id), default: []].append(
          ItemExtent(offset: start, length: length, inIDAT: method == 1))
      }
    }
  }

  /// Where an extent lies in the file (or in the `idat` numbered `idat`), clamped to it; a length
  /// of 0 means "to the end".
  private func fileRange(_ extent: ItemExtent, idat: Int) -> Range<Int>? {
    let container = extent.inIDAT ? (idat < idats.count ? idats[idat] : 0..<0) : 0..<bytes.count
    guard extent.offset < UInt64(container.count) else { return nil }
    let start = container.lowerBound + Int(extent.offset)
    let available = UInt64(container.upperBound - start)
    let length = extent.length == 0 ? available : min(extent.length, available)
    return start..<start + Int(length)
  }
}
