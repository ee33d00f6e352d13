import CVipsShim
import DarkroomCore

extension ImageDecoder {
  /// The most bytes one buffer a loader holds whole may take, for a given ``maxPixels``: an
  /// animated WebP's canvas (4 bytes a pixel), a TIFF strip decoded at once, a TIFF tile.
  /// `maxPixels` bytes (100 MB by default): a streamed image holds a few lines, not this.
  public static func maxBufferBytes(forMaxPixels maxPixels: Int) -> Int { max(maxPixels, 1 << 20) }

  /// The most bytes of PNG metadata (text, ICC profile, EXIF… chunks, compressed ones counted
  /// decompressed) a decoded image may carry: 32 MiB. libpng allocates each chunk at its declared
  /// length before reading it, and libvips keeps a copy.
  public static let maxMetadataBytes = 32 << 20

  /// The most PNG metadata chunks an image may carry (libpng keeps every text chunk).
  public static let maxMetadataChunks = 1_000

  /// The most frames a GIF or animated WebP may have: only the first is decoded, but the loaders
  /// read every frame's header into a table first (libvips' GIF loader stops at 4,096 itself,
  /// with an error that does not say why).
  public static let maxFrames = 4_096

  /// Walks the header fields that decide what the loader will allocate — declared size, PNG chunk
  /// lengths and decompressed metadata, frame tables, animation canvas, TIFF strips and tiles —
  /// and throws before any of it is allocated: `imageTooLarge` when a declared size is over a
  /// limit, `corruptImage` when the bytes cannot hold what is declared. Reads a bounded number of
  /// header bytes (a large local file with `pread`, never whole).
  func guardHeader(_ format: ImageFormat, of input: FetchedData) throws(PipelineError) {
    // JPEG and HEIF/AVIF headers are checked elsewhere (frame marker, `ispe` boxes).
    guard let code = format.shimFormat, [.png, .gif, .webp, .tiff].contains(format) else { return }
    let limits = DrGuardLimits(
      max_pixels: UInt64(max(0, maxPixels)),
      max_buffer_bytes: UInt64(ImageDecoder.maxBufferBytes(forMaxPixels: maxPixels)),
      max_metadata_bytes: UInt64(ImageDecoder.maxMetadataBytes),
      max_metadata_chunks: UInt64(ImageDecoder.maxMetadataChunks),
      max_frames: UInt64(ImageDecoder.maxFrames),
      small_chunk_bytes: 1 << 16)
    var result = DrGuardResult()
    let verdict: DrGuardVerdict
    if let descriptor = input.bytes.streamingDescriptor {
      verdict = withExtendedLifetime(input.bytes) { dr_guard_check(code, nil, input.bytes.count, descriptor, limits, &result) }
    } else {
      verdict = input.bytes.withUnsafeBytes { raw in
        dr_guard_check(code, raw.baseAddress, raw.count, -1, limits, &result)
      }
    }
    let source = input.source.description
    switch verdict {
    case DR_GUARD_OK:
      return
    case DR_GUARD_TOO_MANY_PIXELS:
      // Header fields are at most 64 bits; clamp so the message never traps.
      let width = Int(clamping: result.width)
      let height = Int(clamping: result.height)
      try checkPixelLimit(width: width, height: height, format: format, source: input.source)
      throw PipelineError(
        .imageTooLarge, "the \(format) image declares \(width)×\(height) pixels, over the limit of \(maxPixels) (maxPixels)",
        source: source)
    case DR_GUARD_TOO_LARGE:
      throw PipelineError(.imageTooLarge, ImageDecoder.guardMessage(&result), source: source)
    default:
      throw PipelineError(.corruptImage, ImageDecoder.guardMessage(&result), source: source)
    }
  }

  private static func guardMessage(_ result: inout DrGuardResult) -> String {
    withUnsafeBytes(of: &result.message) { raw in
      String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
    }
  }
}

extension ImageDecoder {
  /// The most bytes an image whose loader holds it whole may take while it is decoded: 4 bytes a
  /// pixel of ``maxPixels`` (an 8-bit RGBA image at the limit; 400 MB by default).
  public static func maxHeldBytes(forMaxPixels maxPixels: Int) -> UInt64 {
    let (bytes, overflow) = UInt64(max(0, maxPixels)).multipliedReportingOverflow(by: 4)
    return overflow ? .max : bytes
  }

  /// Refuses, as `imageTooLarge`, an image inside ``maxPixels`` whose loader cannot stream it and
  /// would hold more than ``maxHeldBytes(forMaxPixels:)``: an AVIF/HEIF (the AV1 or HEVC decoder's planes,
  /// then libheif's RGB copies: twice both), an interlaced PNG (libpng reads every pass into one
  /// buffer: 1.5 times the image), a progressive or multi-scan JPEG (libjpeg's coefficient buffer,
  /// even with shrink-on-load). The factors are measured peak memory, rounded up.
  /// Streamed images hold a few lines and are bounded by ``maxPixels`` alone.
  func guardHeldImage(
    _ format: ImageFormat, image: VipsImage, heif: HEIFDeclaration?, jpeg: JPEGFrame?, input: FetchedData
  ) throws(PipelineError) {
    let pixels = UInt64(max(0, image.width)) * UInt64(max(0, image.height))
    let held: UInt64
    let why: String
    switch format {
    case .avif, .heif:
      let area = heif.map { UInt64($0.width) * UInt64($0.height) } ?? 0
      let decoderBytes = heif?.bytesPerDecodedPixel ?? 3
      // Measured: 6.7–8.2 bytes a pixel for 8-bit 4:2:0 RGB (the AV1 decoder's picture, libheif's
      // conversion and its RGB copy), so twice the planes and the RGB image.
      held = ImageDecoder.saturating(Double(max(pixels, area)) * 2 * (decoderBytes + Double(image.bytesPerPixel)))
      why = "its decoder holds the whole image (the decoded planes, then RGB copies)"
    case .png where ImageDecoder.isInterlacedPNG(input.bytes):
      // Measured: 5.8 bytes a pixel for 8-bit RGBA (libpng's passes, then libvips' image).
      held = ImageDecoder.saturating(Double(pixels) * Double(image.bytesPerPixel) * 1.5)
      why = "it is interlaced, so the decoder holds the whole image"
    case .jpeg:
      guard let frame = jpeg, frame.buffersWholeImage else { return }
      held = frame.coefficientBytes
      why = "it is progressive (or multi-scan), so the decoder holds every DCT coefficient, even when shrinking on load"
    default:
      return
    }
    let limit = ImageDecoder.maxHeldBytes(forMaxPixels: maxPixels)
    guard held > limit else { return }
    throw PipelineError(
      .imageTooLarge,
      "the \(format) image (\(image.width)×\(image.height)) would take about \(ImageDecoder.megabytes(held)) MB while it is decoded: "
        + "\(why); such images may take at most \(ImageDecoder.megabytes(limit)) MB (4 bytes a pixel of maxPixels \(maxPixels)); "
        + "raise maxPixels to accept it",
      source: input.source.description)
  }

  /// Whether a PNG's header declares Adam7 interlacing (the IHDR byte after the filter method).
  static func isInterlacedPNG(_ bytes: ImageBytes) -> Bool {
    let head = bytes.prefix(29)
    return head.count == 29 && head[28] == 1
  }

  private static func megabytes(_ bytes: UInt64) -> UInt64 { bytes / 1_000_000 + (bytes % 1_000_000 == 0 ? 0 : 1) }

  /// A byte estimate as a whole number, rounded up; `UInt64.max` when it is larger.
  private static func saturating(_ estimate: Double) -> UInt64 {
    estimate < 18_000_000_000_000_000_000 ? UInt64(estimate.rounded(.up)) : .max
  }
}
