@0xd3c6a1f2b4e59a17;

struct Header {
  sequence @0 :UInt64;
  sentAtNs @1 :UInt64;
  sourceId @2 :UInt32;
}

struct Reading {
  channel @0 :UInt32;
  value @1 :Float64;
  quality @2 :UInt8;
}

struct SensorFrame {
  header @0 :Header;
  temperatureC @1 :Float64;
  pressurePa @2 :Float32;
  status @3 :Status;
  readings @4 :List(Reading);
  label @5 :Text;
  blob @6 :Data;
}

enum Status {
  ok @0;
  degraded @1;
  failed @2;
}
