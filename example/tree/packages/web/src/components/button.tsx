export function Button(props: { label: string }) {
  return <button>{props.label}</button>;
}
