// Original file: proto/kvdirectory.proto

export const StreamState = {
  STREAM_STATE_UNSPECIFIED: 'STREAM_STATE_UNSPECIFIED',
  CONNECTING: 'CONNECTING',
  RECOVERING: 'RECOVERING',
  SYNCHRONIZED: 'SYNCHRONIZED',
  UNSYNCHRONIZED: 'UNSYNCHRONIZED',
} as const;

export type StreamState =
  | 'STREAM_STATE_UNSPECIFIED'
  | 0
  | 'CONNECTING'
  | 1
  | 'RECOVERING'
  | 2
  | 'SYNCHRONIZED'
  | 3
  | 'UNSYNCHRONIZED'
  | 4

export type StreamState__Output = typeof StreamState[keyof typeof StreamState]
