import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Testing

/// The `metadata` stage: what each output format carries after it, read back from the bytes.
@Suite("Metadata kept or stripped")
struct MetadataTests {
  let harness = StageHarness()
  static let copyright = "(c) 2026 Darkroom test suite"

  /// A photo as a camera and an editor leave it: a JPEG carrying an ICC profile (a corpus TIFF's),
  /// an EXIF block with a copyright and an artist, and an XMP packet, decoded.
  func annotated() throws -> DecodedImage {
    let decoded = try ImageDecoder(convertToSRGB: false).decode(try corpusFile("pillow/hopper.iccprofile.tif"))
    #expect(decoded.image.hasField("icc-profile-data"))
    let image = try decoded.image.materialized()
      .with(field: "exif-ifd0-Copyright", string: Self.copyright)
      .with(field: "exif-ifd0-Artist", string: "Someone Else")
      .with(field: "xmp-data", bytes: Array(#"<x:xmpmeta xmlns:x="adobe:ns:meta/"></x:xmpmeta>"#.utf8))
    let photo = try ImageEncoder(.jpeg(quality: 95), keepMetadata: true).encode(decoded.with(image))
    let annotated = try ImageDecoder(convertToSRGB: false).decode(FetchedData(source: photo.source, bytes: photo.bytes))
    #expect(annotated.image.hasField("exif-data"))
    return annotated
  }

  struct ReadBack: Equatable {
    var icc: Bool
    var copyright: Bool
    var artist: Bool
    var xmp: Bool
  }

  func readBack(_ kept: Set<KeptMetadata>?, as format: EncodeFormat) async throws -> ReadBack {
    var image = try annotated()
    if let kept { image = try await harness.run(MetadataKeeper(keeping: kept), on: image) }
    let encoded = try await harness.run(ImageEncoder(format), on: image)
    let back = try decodeBack(encoded).image
    guard encoded.format == .png else {
      return ReadBack(
        icc: back.hasField("icc-profile-data"),
        copyright: back.stringField("exif-ifd0-Copyright")?.contains(Self.copyright) ?? false,
        artist: back.hasField("exif-ifd0-Artist"), xmp: back.hasField("xmp-data"))
    }
    // libvips 8.14's PNG loader does not read the eXIf chunk its saver writes: read the bytes.
    let bytes = Array(encoded.bytes.data)
    func holds(_ text: String) -> Bool {
      let needle = Array(text.utf8)
      return bytes.count >= needle.count
        && (0...(bytes.count - needle.count)).contains { bytes[$0..<($0 + needle.count)].elementsEqual(needle) }
    }
    return ReadBack(
      icc: back.hasField("icc-profile-data"), copyright: holds("eXIf") && holds(Self.copyright), artist: holds("Someone Else"),
      xmp: holds("xmpmeta"))
  }

  @Test("stripping leaves no metadata in any format (libvips' WebP saver alone kept EXIF, XMP and ICC)")
  func stripped() async throws {
    for format in [EncodeFormat.jpeg(), .webp(), .png(), .avif(), .gif()] {
      let encoded = try await harness.run(ImageEncoder(format), on: try annotated())
      let back = try decodeBack(encoded).image
      for field in ["icc-profile-data", "exif-data", "xmp-data"] { #expect(!back.hasField(field), "\(format): \(field)") }
    }
  }

  @Test(
    "metadata keeps the ICC profile and/or the EXIF copyright, and nothing else; without it, encode strips all",
    arguments: [EncodeFormat.jpeg(), .webp(), .png(), .avif()])
  func kept(_ format: EncodeFormat) async throws {
    let none = ReadBack(icc: false, copyright: false, artist: false, xmp: false)
    #expect(try await readBack(nil, as: format) == none)
    #expect(try await readBack([], as: format) == none)
    #expect(try await readBack([.icc], as: format) == ReadBack(icc: true, copyright: false, artist: false, xmp: false))
    #expect(try await readBack([.copyright], as: format) == ReadBack(icc: false, copyright: true, artist: false, xmp: false))
    #expect(
      try await readBack([.icc, .copyright], as: format) == ReadBack(icc: true, copyright: true, artist: false, xmp: false))
  }

  @Test("encode's keepMetadata still keeps everything (the test image does carry all four)")
  func keepEverything() async throws {
    let encoded = try await harness.run(ImageEncoder(.jpeg(), keepMetadata: true), on: try annotated())
    let back = try decodeBack(encoded).image
    #expect(back.hasField("icc-profile-data") && back.hasField("exif-ifd0-Artist") && back.hasField("xmp-data"))
    #expect(back.stringField("exif-ifd0-Copyright")?.contains(Self.copyright) == true)
  }
}
