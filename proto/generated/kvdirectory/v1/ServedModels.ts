// Original file: proto/kvdirectory.proto

import type { ServedModel as _kvdirectory_v1_ServedModel, ServedModel__Output as _kvdirectory_v1_ServedModel__Output } from '../../kvdirectory/v1/ServedModel.js';

export interface ServedModels {
  'data'?: (_kvdirectory_v1_ServedModel)[];
}

export interface ServedModels__Output {
  'data': (_kvdirectory_v1_ServedModel__Output)[];
}
