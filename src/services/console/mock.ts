/**
 * The mock API (`/fakeapi/…`): exactly seven GET routes answering constant bytes, members in
 * the console reference's order. Nothing here reads storage or calls another service.
 */
const PROJECT =
  '{"id":"project-00000000-0000-0000-0000-000000000001","name":"Hello","host":"red-pepper.holacloud.app","owners":["user1"]}';

export const MOCK_ROUTES: readonly { path: string; operationId: string; summary: string; body: string }[] = [
  {
    path: '/fakeapi/authapi/auth/me',
    operationId: 'getMockUser',
    summary: 'The signed-in user (mock)',
    body: '{"email":"fulanez@gmail.com","id":"user-1234","nick":"fulanez","picture":"https://lh3.googleusercontent.com/a-/ACNPEu8h8e8wfcL1Hsk4JbFsROFXIBNIllOFLLPnWEDWV2s=s96-c"}',
  },
  {
    path: '/fakeapi/projectsapi/v0/projects',
    operationId: 'listMockProjects',
    summary: 'Project list (mock)',
    body: `[${PROJECT}]`,
  },
  {
    path: '/fakeapi/projectsapi/v0/projects/project-00000000-0000-0000-0000-000000000001',
    operationId: 'getMockProject',
    summary: 'One project (mock); any other id is 404',
    body: PROJECT,
  },
  {
    path: '/fakeapi/inceptionapi/v1/databases',
    operationId: 'listMockDatabases',
    summary: 'Document database list (mock)',
    body: '[{"id":"00000000-0000-0000-0000-000000000001","name":"db1","owners_length":1}]',
  },
  {
    path: '/fakeapi/inceptionapi/v1/databases/00000000-0000-0000-0000-000000000001/collections',
    operationId: 'listMockCollections',
    summary: 'Collections of the mock database; any other id is 404',
    body: '[{"name":"users","total":2,"indexes":1,"defaults":{"id":"uuid()"}},{"name":"orders","total":0,"indexes":0,"defaults":null}]',
  },
  {
    path: '/fakeapi/lambdasapi/api/v0/lambdas',
    operationId: 'listMockLambdas',
    summary: 'Lambda list (mock)',
    body: '[{"id":"a663e1f1-e5cb-4fc2-b846-53f2cc7574c9","method":"GET","name":"Index","path":"/"}]',
  },
  {
    path: '/fakeapi/filesapi/v1/buckets',
    operationId: 'listMockBuckets',
    summary: 'Bucket list (mock)',
    body: '[{"id":"bucket-00000000-0000-0000-0000-000000000001","name":"my-first-bucket","description":"First bucket","created_timestamp":1782045600000000000,"created_h":"2026-06-21T12:40:00Z","owners":["user-1234"]}]',
  },
];
